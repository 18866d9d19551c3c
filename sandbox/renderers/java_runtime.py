"""The Java harness's fixed sources (sandbox/renderers/java.py): the base of the minimal
org.javatuples classes, and CodelmRuntime, the JSON encoder and record loop every program's cases call.
Compiled once on the host where it can be (java.runtime_dir), else carried by each program.
"""

from __future__ import annotations

from sandbox.renderers import base


TUPLE_BASE = """package org.javatuples;

import java.util.*;

/** A minimal stand-in for org.javatuples: fixed-size, immutable, value equality. */
public abstract class Tuple {
  private final Object[] values;
  protected Tuple(Object[] values) { this.values = values; }
  public final int getSize() { return values.length; }
  public final Object getValue(int pos) { return values[pos]; }
  public final List<Object> toList() { return Collections.unmodifiableList(Arrays.asList(values)); }
  public final Object[] toArray() { return values.clone(); }
  public final boolean contains(Object value) { return Arrays.asList(values).contains(value); }
  @Override public final boolean equals(Object other) {
    return other != null && other.getClass() == getClass() && Arrays.equals(values, ((Tuple) other).values);
  }
  @Override public final int hashCode() { return Arrays.hashCode(values); }
  @Override public final String toString() { return Arrays.toString(values); }
}
"""


# Type-directed conversion of the returned value to canonical JSON, and the loop over the cases.
# Records go straight to file descriptor 1 (System.setOut or a half-written line of the solution's
# own output cannot hide them: each record starts on a fresh line), and the JVM is halted at the end
# so a thread the solution left running cannot keep it alive.
RUNTIME = r"""import java.util.*;

public final class CodelmRuntime {
  /** The test cases: the generated Main calls the solution for case i. */
  public interface Cases {
    Object call(int i) throws Throwable;
  }

  public static final class Ty {
    final String name;
    final Ty[] args;
    public Ty(String name, Ty... args) { this.name = name; this.args = args; }
  }

  /** A map input, in the test's order (as the benchmark's own dicts iterate). */
  public static <K, V> Map<K, V> mapOf(Object... keysAndValues) {
    Map<K, V> map = new LinkedHashMap<K, V>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      @SuppressWarnings("unchecked") K key = (K) keysAndValues[i];
      @SuppressWarnings("unchecked") V value = (V) keysAndValues[i + 1];
      map.put(key, value);
    }
    return map;
  }

  static RuntimeException wrongType(Ty t, Object v) {
    return new ClassCastException("expected " + t.name + ", got " + (v == null ? "null" : v.getClass().getName()));
  }

  static void encode(StringBuilder out, Ty t, Object v) {
    if (t.name.equals("optional")) {
      if (v instanceof Optional) v = ((Optional<?>) v).orElse(null);
      if (v == null) out.append("null");
      else encode(out, t.args[0], v);
      return;
    }
    if (v == null) throw new NullPointerException("returned null where a " + t.name + " is expected");
    switch (t.name) {
      case "bool":
        if (!(v instanceof Boolean)) throw wrongType(t, v);
        out.append(((Boolean) v).booleanValue() ? "true" : "false");
        return;
      case "int":
        if (!(v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte)) throw wrongType(t, v);
        out.append(((Number) v).longValue());
        return;
      case "float": {
        if (!(v instanceof Double || v instanceof Float || v instanceof Long || v instanceof Integer)) throw wrongType(t, v);
        double d = ((Number) v).doubleValue();
        out.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : Double.toString(d));
        return;
      }
      case "char":  // a whole program's declared character (Character), recorded as a string
        if (!(v instanceof Character)) throw wrongType(t, v);
        encodeString(out, String.valueOf(((Character) v).charValue()));
        return;
      case "string":
        if (!(v instanceof String)) throw wrongType(t, v);
        encodeString(out, (String) v);
        return;
      case "list":
      case "set": {
        if (!(t.name.equals("list") ? v instanceof List : v instanceof Set)) throw wrongType(t, v);
        out.append('[');
        boolean first = true;
        for (Object item : (Collection<?>) v) {
          if (!first) out.append(", ");
          first = false;
          encode(out, t.args[0], item);
        }
        out.append(']');
        return;
      }
      case "map": {
        if (!(v instanceof Map)) throw wrongType(t, v);
        out.append('[');
        boolean first = true;
        for (Map.Entry<?, ?> entry : ((Map<?, ?>) v).entrySet()) {
          if (!first) out.append(", ");
          first = false;
          out.append('[');
          encode(out, t.args[0], entry.getKey());
          out.append(", ");
          encode(out, t.args[1], entry.getValue());
          out.append(']');
        }
        out.append(']');
        return;
      }
      case "tuple": {
        if (!(v instanceof org.javatuples.Tuple) || ((org.javatuples.Tuple) v).getSize() != t.args.length) throw wrongType(t, v);
        out.append('[');
        for (int i = 0; i < t.args.length; i++) {
          if (i > 0) out.append(", ");
          encode(out, t.args[i], ((org.javatuples.Tuple) v).getValue(i));
        }
        out.append(']');
        return;
      }
      default:
        throw new IllegalStateException("unknown type " + t.name);
    }
  }

  static void encodeString(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c >= 0x20 && c < 0x7f) out.append(c);
      else if (c == '\n') out.append("\\n");
      else if (c == '\t') out.append("\\t");
      else if (c == '\r') out.append("\\r");
      else {
        String hex = Integer.toHexString(c);
        out.append("\\u");
        for (int k = hex.length(); k < 4; k++) out.append('0');
        out.append(hex);
      }
    }
    out.append('"');
  }

  static String oneLine(Throwable e) {
    String text = e.toString().replace('\n', ' ').replace('\r', ' ');
    return text.length() > 300 ? text.substring(0, 300) : text;
  }

  public static void run(Ty returnType, long[] ids, Cases cases) throws java.io.IOException {
    java.io.PrintStream solutionOut = System.out;
    java.io.FileOutputStream records = new java.io.FileOutputStream(java.io.FileDescriptor.out);
    for (int i = 0; i < ids.length; i++) {
      String line;
      try {
        StringBuilder value = new StringBuilder();
        encode(value, returnType, cases.call(i));
        line = "ok " + value;
      } catch (Throwable e) {  // errors too (StackOverflowError, OutOfMemoryError): the case failed
        line = "exception " + oneLine(e);
      }
      solutionOut.flush();
      System.out.flush();
      records.write(("\nPREFIX" + ids[i] + " " + line + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }
    Runtime.getRuntime().halt(0);
  }
}
""".replace("PREFIX", base.RECORD_PREFIX)
