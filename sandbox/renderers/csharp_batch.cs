// The C# renderer's batch driver (sandbox/renderers/csharp.py): compiles many programs in one
// mono process, each as its own compilation, exactly as `mcs <options> main.cs` would alone.
//
//   mono codelm-mcs-batch.exe <mcs.exe> <count>
//
// Member k's sources are m<k>/main.cs and its mcs options the lines of m<k>/options (those of the
// program compiled alone, -out:main.exe main.cs included: members may differ, as in whether they
// reference System.dll); its compilation runs with m<k>/ as the current directory, so the compiler
// reads, writes and names the same relative paths as alone. Every member's options are read before
// the first compilation. What mcs prints for it (its
// diagnostics on stderr and the "Compilation failed: ..." line on stdout, interleaved as written)
// goes to reports/<k>.out, then its exit status to reports/<k>.status (written last, by rename:
// a member without a status file is compiled alone by sandbox/batching.py).
//
// Replicates mcs's own Driver.Main (mono 6.8) without its Environment.Exit, and resets mcs's static
// state after each compilation (CompilerCallableEntryPoint.Reset, the entry point mono provides for
// compiling repeatedly in one process; without it LINQ's transparent identifiers and #line's file
// names carry over). A compilation whose outcome could depend on the process it shares rather than
// on its source gets no report, and is compiled alone:
// - an exception escaping the compiler (the driver then stops: mcs's state is unknown);
// - an internal compiler error (CS0584: mcs turns a stack overflow, and may turn running out of
//   memory, into one; this process's stack is a few frames deeper and its heap fuller than a fresh
//   mcs's), a failure to write the output (CS0016) or any mention of OutOfMemoryException: the
//   driver then stops;
// - a compilation slower than SlowSeconds (alone, a compile step has a wall-clock limit that a
//   warm compiler could finish under while a cold one would not).
using System;
using System.Diagnostics;
using System.IO;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Text;

static class CodelmMcsBatch {
    static string mcsPath;

    static int Main(string[] args) {
        if (args.Length != 2) {
            Console.Error.WriteLine("usage: codelm-mcs-batch.exe MCS_EXE COUNT");
            return 2;
        }
        mcsPath = args[0];
        // mcs.exe is not in the GAC: resolve it by path before any method that uses its types is compiled.
        AppDomain.CurrentDomain.AssemblyResolve += (sender, e) =>
            new AssemblyName(e.Name).Name == "mcs" ? Assembly.LoadFrom(mcsPath) : null;
        int count = int.Parse(args[1]);
        var options = new string[count][];
        for (int k = 0; k < count; k++)
            options[k] = File.ReadAllLines(Path.Combine("m" + k, "options"), Encoding.UTF8);
        return Members.CompileAll(options);
    }
}

static class Members {
    const double SlowSeconds = 5.0;
    static readonly ConstructorInfo NewDriver = DriverType().GetConstructor(
        BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic, null,
        new[] { typeof(Mono.CSharp.CompilerContext) }, null);
    static readonly MethodInfo Compile = DriverType().GetMethod(
        "Compile", BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);

    static Type DriverType() {
        return typeof(Mono.CSharp.CompilerContext).Assembly.GetType("Mono.CSharp.Driver", true);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int CompileAll(string[][] options) {
        int count = options.Length;
        string root = Directory.GetCurrentDirectory();
        Directory.CreateDirectory(Path.Combine(root, "reports"));
        var stdout = Console.Out;
        var stderr = Console.Error;
        for (int k = 0; k < count; k++) {
            var output = new StringWriter();
            int status;
            bool trusted;
            var watch = Stopwatch.StartNew();
            try {
                Directory.SetCurrentDirectory(Path.Combine(root, "m" + k));
                Console.SetOut(output);
                Console.SetError(output);
                status = CompileOne(options[k]);
                trusted = Trusted(output.ToString());
            } catch (Exception e) {
                Console.SetOut(stdout);
                Console.SetError(stderr);
                stderr.WriteLine("m" + k + ": the compiler failed in this process; the rest compile alone: " + e);
                return 1;
            } finally {
                Console.SetOut(stdout);
                Console.SetError(stderr);
                Directory.SetCurrentDirectory(root);
                Mono.CSharp.CompilerCallableEntryPoint.Reset();
            }
            if (!trusted) {
                stderr.WriteLine("m" + k + ": the compiler failed in this process; it and the rest compile alone");
                return 1;
            }
            if (watch.Elapsed.TotalSeconds > SlowSeconds) {
                stderr.WriteLine("m" + k + ": slow to compile; it compiles alone");
                continue;
            }
            Report(Path.Combine(root, "reports", k.ToString()), output.ToString(), status);
        }
        return 0;
    }

    static bool Trusted(string output) {
        return !(output.Contains("error CS0584") || output.Contains("error CS0016")
                 || output.Contains("OutOfMemoryException"));
    }

    // mcs's Driver.Main, returning its exit status where it would call Environment.Exit.
    static int CompileOne(string[] options) {
        Mono.CSharp.Location.InEmacs = Environment.GetEnvironmentVariable("EMACS") == "t";
        var parser = new Mono.CSharp.CommandLineParser(Console.Out);
        var settings = parser.ParseArguments(options);
        if (settings == null)
            return 1;
        if (parser.HasBeenStopped)
            return 0;
        var context = new Mono.CSharp.CompilerContext(settings, new Mono.CSharp.ConsoleReportPrinter());
        object driver = NewDriver.Invoke(new object[] { context });
        bool compiled;
        try {
            compiled = (bool) Compile.Invoke(driver, null);
        } catch (TargetInvocationException e) {
            throw e.InnerException ?? e;
        }
        var report = context.Report;
        if (compiled && report.Errors == 0) {
            if (report.Warnings > 0)
                Console.WriteLine("Compilation succeeded - {0} warning(s)", report.Warnings);
            return 0;
        }
        Console.WriteLine("Compilation failed: {0} error(s), {1} warnings", report.Errors, report.Warnings);
        return 1;
    }

    static void Report(string prefix, string output, int status) {
        // As the console writes it: UTF-8 without a byte-order mark, invalid text replaced.
        File.WriteAllText(prefix + ".out", output, new UTF8Encoding(false));
        File.WriteAllText(prefix + ".status.tmp", status + "\n");
        File.Delete(prefix + ".status");  // File.Move does not replace
        File.Move(prefix + ".status.tmp", prefix + ".status");
    }
}
