// The Java renderer's batch driver (sandbox/renderers/java.py): compiles many programs in one JVM,
// each as its own javac compilation, exactly as `javac <options> -d . -cp <runtime>:. Main.java` does
// alone in the program's own box.
//
//   java <JVM flags> --add-exports ... -cp codelm-javac-batch.jar CodelmJavacBatch RUNTIME COUNT JAVAC_OPTIONS...
//
// Member k's source is m<k>/Main.java. Its compilation gets a fresh javac context and file manager
// (javax.tools' JavacTool.getTask: nothing javac computed for one member is seen by the next; the one
// table javac keeps across compilations in a JVM, of interned names, is turned off), the options
// given (those of the program compiled alone) and `-d m<k>/out -cp RUNTIME:m<k>/out`: its own empty
// output folder stands where the box's "." stands alone, so no other member's source or classes are
// on any path javac searches or writes. The source is handed to javac as a file object named
// Main.java, so the diagnostics name it as they do alone (javac's command-line entry would name it
// m<k>/Main.java); they and the exit status are javac's own (JavacTaskImpl.doCall, the status the
// javac command exits with). Over the test programs, compile errors and warnings included, the
// diagnostics and the class files are byte for byte those of javac alone. What javac prints goes to
// m<k>/diagnostics, then the status to m<k>/status (written last, by rename: a member without a
// status file is compiled alone by sandbox/batching.py). Member k then runs with m<k>/out's class
// files bound into its box.
//
// A compilation whose outcome could depend on the process it shares rather than on its source gets
// no report and is compiled alone:
// - an abnormal end (an exception escaping javac, or a status other than 0 and 1: javac's answer to
//   a stack overflow or an exhausted heap). The driver stops there: what a failure left behind in
//   this JVM is unknown, so the rest compile alone too. The JVM's flags, heap cap included, are
//   javac's alone: a compilation that exhausts the heap alone exhausts it here too, where the driver
//   holds a little more.
// - a compilation nested near javac's stack limit: how deep javac recurses before its
//   stack runs out depends on which of its methods the JIT has compiled, and a warm JVM's differ
//   from a cold javac's (on a 1 MB thread, like javac's main thread alone, the driver accepted 1315
//   nested additions where javac alone stopped at 1197). So each compilation runs on a thread with
//   STACK_KB of stack: the deepest nesting accepted here is 3 to 5 times under what javac accepts
//   alone (measured over sums, parentheses, blocks, lambdas, generics, array initialisers, if-else
//   chains and conditionals: e.g. 354 against 1197 nested additions), and a program nested deeper
//   overflows here and compiles alone. Ordinary programs, the first one's class loading included,
//   compile within 160 KB.
// - a slow compilation (over SLOW_SECONDS): alone, a compile step has a wall-clock limit (60 s) that
//   a warm javac could finish under while a cold one, a second or two of warming up behind, would
//   not. The driver stops (javac cannot be interrupted safely), so one such member does not hold
//   the whole build up to its limit either.
// - outputs over OUTPUT_CAP_BYTES: alone, they are written to a size-capped box (Limits.disk_mb,
//   64 MB) where enough of them (a completion can fold 64 KB string constants into many classes)
//   fail to write. This build's box is a host folder, so the output is also watched while javac
//   runs, and the driver stops as soon as it passes the cap (which must stay under the box's size;
//   the test programs write 5 to 10 KB).
import java.io.IOException;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import javax.tools.SimpleJavaFileObject;

import com.sun.tools.javac.api.JavacTaskImpl;
import com.sun.tools.javac.api.JavacTool;

final class CodelmJavacBatch {
  static final long STACK_KB = 384;
  static final double SLOW_SECONDS = 10.0;
  static final long OUTPUT_CAP_BYTES = 8L << 20;
  // How often a running compilation's output and time are checked (an ordinary one is done in
  // 20-40 ms and never checked).
  static final long POLL_MS = 50;
  static final int PAGE = 4096;  // the capped box is a tmpfs: a file takes whole pages

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: CodelmJavacBatch RUNTIME COUNT JAVAC_OPTIONS...");
      System.exit(2);
    }
    String runtime = args[0];
    int count = Integer.parseInt(args[1]);
    List<String> options = Arrays.asList(args).subList(2, args.length);
    JavacTool tool = JavacTool.create();
    for (int k = 0; k < count; k++) {
      Member member = new Member(Paths.get("m" + k));
      String refused = member.compile(tool, runtime, options);
      if (refused != null) {
        System.err.println("m" + k + ": " + refused);
      }
    }
  }

  /** A source handed to javac under the name the program's file has alone. */
  static final class Source extends SimpleJavaFileObject {
    final String text;

    Source(Path path, String text) {
      super(path.toAbsolutePath().toUri(), Kind.SOURCE);
      this.text = text;
    }

    @Override public String getName() { return "Main.java"; }

    @Override public CharSequence getCharContent(boolean ignoreEncodingErrors) { return text; }
  }

  static final class Member {
    final Path dir;
    final Path out;
    final StringWriter diagnostics = new StringWriter();
    volatile int status = -1;
    volatile Throwable failure;

    Member(Path dir) {
      this.dir = dir;
      this.out = dir.resolve("out");
    }

    /** Compiles the member and writes its report; returns why it has none (null: it has one). */
    String compile(JavacTool tool, String runtime, List<String> fixed) throws Exception {
      String text;
      try {
        text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(ByteBuffer.wrap(Files.readAllBytes(dir.resolve("Main.java")))).toString();
      } catch (CharacterCodingException e) {
        // javac reports malformed text through its file manager, which this file object bypasses.
        // (Python writes the sources, always as UTF-8.)
        return "not UTF-8; it compiles alone";
      }
      Files.createDirectories(out);
      List<String> options = new ArrayList<>(fixed);
      // javac recycles a finished compilation's name table (the interned identifiers) for the next
      // one; an unshared table keeps even that from crossing members (it changes nothing javac
      // writes: the comparison with javac alone, at the top, holds with it).
      options.addAll(List.of("-XDuseUnsharedTable", "-d", out.toString(), "-cp", runtime + ":" + out));
      Source source = new Source(dir.resolve("Main.java"), text);
      Thread thread = new Thread(null, () -> run(tool, options, source), "javac-" + dir, STACK_KB << 10);
      thread.setDaemon(true);
      long started = System.nanoTime();
      thread.start();
      thread.join(POLL_MS);
      while (thread.isAlive()) {
        if ((System.nanoTime() - started) / 1e9 > SLOW_SECONDS) {
          stop("slow to compile");
        }
        if (outputBytes() > OUTPUT_CAP_BYTES) {
          stop("its classes outgrow the cap");
        }
        thread.join(POLL_MS);
      }
      if (failure != null || (status != 0 && status != 1)) {
        stop("javac ended abnormally (status " + status + ", " + failure + ")");
      }
      if ((System.nanoTime() - started) / 1e9 > SLOW_SECONDS) {
        return "slow to compile; it compiles alone";
      }
      if (outputBytes() > OUTPUT_CAP_BYTES) {
        return "its classes outgrow the cap; it compiles alone";
      }
      report();
      return null;
    }

    void run(JavacTool tool, List<String> options, Source source) {
      try {
        JavacTaskImpl task =
            (JavacTaskImpl) tool.getTask(diagnostics, null, null, options, null, List.of(source));
        status = task.doCall().exitCode;
      } catch (Throwable e) {
        failure = e;
      }
    }

    /** What the member's files would take in its own box: its source and its classes, in pages. */
    long outputBytes() throws IOException {
      long total = pages(Files.size(dir.resolve("Main.java")));
      try (DirectoryStream<Path> files = Files.newDirectoryStream(out)) {
        for (Path file : files) {
          total += Files.isRegularFile(file) ? pages(Files.size(file)) : PAGE;
        }
      }
      return total;
    }

    static long pages(long bytes) {
      return (bytes + PAGE - 1) / PAGE * PAGE;
    }

    void report() throws IOException {
      Files.write(dir.resolve("diagnostics"), diagnostics.toString().getBytes(StandardCharsets.UTF_8));
      Path temporary = dir.resolve("status.tmp");
      Files.write(temporary, (status + "\n").getBytes(StandardCharsets.UTF_8));
      Files.move(temporary, dir.resolve("status"), StandardCopyOption.ATOMIC_MOVE);
    }

    /** Ends the driver: this member and the rest get no report and compile alone. */
    void stop(String why) {
      System.err.println(dir + ": " + why + "; it and the rest compile alone");
      System.err.flush();
      Runtime.getRuntime().halt(3);
    }
  }
}
