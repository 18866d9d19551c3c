// The names through which a C# program can reach System.dll (sandbox/renderers/csharp.py): a
// program whose text holds none of them compiles to the same main.exe, byte for byte, with and
// without -r:System.dll, and is compiled without it (importing System.dll is about a third of a
// warm mcs compilation). Run once on the host when the runtime library is built:
//
//   mono codelm-csharp-names.exe System.dll OTHER.dll...   (the other assemblies a program references)
//
// prints one name a line:
// - the name of every top-level type System.dll defines, public or not (naming an inaccessible
//   one is an error of its own, CS0122), without its generic arity;
// - every extension method a program can call there (a call names the method, not its class);
// - the namespace segments only System.dll brings: of System.Net.Sockets, "Net" unless another
//   assembly has a System.Net namespace (or one under it), and every segment after it;
// - the types and members of the other assemblies that lead to System.dll without naming it, found
//   to a fixed point: a type whose base type, interfaces, generic constraints or any non-private
//   member's signature holds a System.dll type (or one of these types) -- HashSet<T> implements
//   System.dll's ISet<T>; Enumerable.ToHashSet returns a HashSet<T> -- gives its own name and
//   the names of those members (a member reached by syntax rather than by name, such as an
//   indexer, an operator, GetEnumerator for foreach or Add for a collection initializer, is
//   reached through a value of its type, whose name or whose producer's name is then listed).
// Listing too much only costs speed (the program keeps System.dll); tests/test_batching_csharp.py
// compiles programs both ways and compares.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Runtime.CompilerServices;

static class CodelmCSharpNames {
    const BindingFlags All = BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static
                             | BindingFlags.Instance | BindingFlags.DeclaredOnly;

    static int Main(string[] args) {
        if (args.Length < 1) {
            Console.Error.WriteLine("usage: codelm-csharp-names.exe SYSTEM_DLL OTHER_DLL...");
            return 2;
        }
        var system = Types(Assembly.LoadFrom(args[0]));
        var others = args.Skip(1).SelectMany(path => Types(Assembly.LoadFrom(path))).ToList();
        var names = new SortedSet<string>(StringComparer.Ordinal);

        foreach (var type in system) {
            if (type.DeclaringType == null)  // a nested type is named through its outer type
                names.Add(SimpleName(type));
            // mcs does not see an extension method it cannot call (same diagnostics without it).
            foreach (var method in type.GetMethods(All))
                if (type.IsVisible && method.IsPublic && method.IsDefined(typeof(ExtensionAttribute), false))
                    names.Add(method.Name);
        }

        // Namespaces (and their parents) that the other assemblies bring. A namespace is named from
        // one in scope onwards (a using directive imports types, not namespaces), so the first
        // segment that only System.dll brings is enough.
        var elsewhere = new HashSet<string>(StringComparer.Ordinal);
        foreach (var type in others)
            for (string ns = type.Namespace ?? ""; ns.Length > 0; ns = Parent(ns))
                elsewhere.Add(ns);
        foreach (var ns in system.Select(t => t.Namespace ?? "").Distinct()) {
            var segments = ns.Length == 0 ? new string[0] : ns.Split('.');
            int known = 0;
            while (known < segments.Length && elsewhere.Contains(string.Join(".", segments, 0, known + 1)))
                known++;
            if (known < segments.Length)
                names.Add(segments[known]);
        }

        // Types whose values lead to System.dll: one deriving from such a type (or implementing one,
        // or constrained by one), or with a member whose signature holds one. A program reaches such
        // a type by its name or through a value some member of another such type returns (down to a
        // named type: literals are mscorlib's), and reaches a member by its type's name (static) or
        // through a value of its type (instance, indexer, operator, foreach...); only an extension
        // method is called without its class's name, so its own name is listed.
        var bad = new HashSet<Type>(system);
        var derived = new HashSet<Type>();
        bool grew = true;
        while (grew) {
            grew = false;
            foreach (var type in others) {
                if (derived.Contains(type))
                    continue;
                if (Mentions(type.BaseType, bad) || type.GetInterfaces().Any(i => Mentions(i, bad))
                    || (type.IsGenericTypeDefinition && type.GetGenericArguments().Any(
                            a => a.GetGenericParameterConstraints().Any(c => Mentions(c, bad))))) {
                    derived.Add(type);
                    grew |= bad.Add(type);
                    names.Add(SimpleName(type));
                    continue;
                }
                foreach (var member in type.GetMembers(All)) {
                    if (Visible(member) && Reaches(member, bad)) {
                        if (member.IsDefined(typeof(ExtensionAttribute), false))
                            names.Add(member.Name);
                        grew |= bad.Add(type);
                        names.Add(SimpleName(type));
                    }
                }
            }
        }
        foreach (var name in names)
            if (name.Length > 0 && (char.IsLetter(name[0]) || name[0] == '_') && name.IndexOf('.') < 0)
                Console.WriteLine(name);
        return 0;
    }

    static List<Type> Types(Assembly assembly) {
        try {
            return assembly.GetTypes().ToList();
        } catch (ReflectionTypeLoadException e) {
            return e.Types.Where(t => t != null).ToList();
        }
    }

    static string Parent(string ns) {
        int dot = ns.LastIndexOf('.');
        return dot < 0 ? "" : ns.Substring(0, dot);
    }

    static string SimpleName(Type type) {
        int tick = type.Name.IndexOf('`');
        return tick < 0 ? type.Name : type.Name.Substring(0, tick);
    }

    // Members a program could use: not private, not internal.
    static bool Visible(MemberInfo member) {
        var method = member as MethodBase;
        if (method != null)
            return method.IsPublic || method.IsFamily || method.IsFamilyOrAssembly;
        var field = member as FieldInfo;
        if (field != null)
            return field.IsPublic || field.IsFamily || field.IsFamilyOrAssembly;
        var property = member as PropertyInfo;
        if (property != null)
            return property.GetAccessors(true).Any(Visible);
        var evt = member as EventInfo;
        if (evt != null)
            return evt.GetAddMethod(true) != null && Visible(evt.GetAddMethod(true));
        var nested = member as Type;
        return nested != null && (nested.IsNestedPublic || nested.IsNestedFamily || nested.IsNestedFamORAssem);
    }

    static bool Reaches(MemberInfo member, HashSet<Type> bad) {
        var method = member as MethodBase;
        if (method != null) {
            var info = method as MethodInfo;
            if (info != null && Mentions(info.ReturnType, bad))
                return true;
            if (method.GetParameters().Any(p => Mentions(p.ParameterType, bad)))
                return true;
            return method.IsGenericMethodDefinition && method.GetGenericArguments().Any(
                a => a.GetGenericParameterConstraints().Any(c => Mentions(c, bad)));
        }
        var property = member as PropertyInfo;
        if (property != null)
            return Mentions(property.PropertyType, bad)
                || property.GetIndexParameters().Any(p => Mentions(p.ParameterType, bad));
        var field = member as FieldInfo;
        if (field != null)
            return Mentions(field.FieldType, bad);
        var evt = member as EventInfo;
        if (evt != null)
            return Mentions(evt.EventHandlerType, bad);
        var nested = member as Type;
        return nested != null && bad.Contains(nested);
    }

    static bool Mentions(Type type, HashSet<Type> bad) {
        if (type == null || type.IsGenericParameter)
            return false;
        if (type.HasElementType)
            return Mentions(type.GetElementType(), bad);
        if (type.IsGenericType && !type.IsGenericTypeDefinition)
            return Mentions(type.GetGenericTypeDefinition(), bad)
                || type.GetGenericArguments().Any(a => Mentions(a, bad));
        return bad.Contains(type);
    }
}
