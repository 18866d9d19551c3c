// The build step of batched TypeScript (sandbox/renderers/typescript.py, whose docstring has the
// design): one `tsc -b` over a project per member (folder <dir>/ with tsconfig.json, main.ts and
// globals.d.ts), then, for each member whose outcome is certain, the exit status and diagnostics
// that `tsc ... main.ts globals.d.ts` prints for it alone, in <dir>/codelm_status and
// <dir>/codelm_diagnostics. A member without them is compiled on its own.
//
// usage: node codelm_build.js TSC DIR...   (in the build box; DIRs in the order tsc builds them)
"use strict";

const fs = require("fs");
const { spawnSync } = require("child_process");

const OUTPUT = "codelm_tsc.out";
// Bytes as they are: a member's diagnostics are copied out without decoding them (latin1 maps each
// byte to one character and back).
const BYTES = "latin1";

function runTsc(tsc, dirs) {
  const out = fs.openSync(OUTPUT, "w");
  try {
    // --verbose: a "Building project '<dir>/tsconfig.json'..." line opens each project's part of the
    // output. tsc -b buffers a project's status lines and diagnostics and writes them whole, in the
    // order of the command line, once that project is done.
    return spawnSync(tsc, ["-b", "--verbose", "--pretty", "false", "--singleThreaded", ...dirs],
                     { stdio: ["ignore", out, out] });
  } finally {
    fs.closeSync(out);
  }
}

// Where each member's part of the output starts and ends, or null where it cannot be told. The
// folders' names hold a random token the members cannot know, so no text a member's diagnostics
// print (they quote its code) can pass for tsc's own lines about another member.
function sections(text, dirs) {
  const found = [];
  let after = 0;
  for (const dir of dirs) {
    const header = ` - Building project '${dir}/tsconfig.json'...\n\n`;
    const at = text.indexOf(header, after);
    if (at < 0) return null;  // every project is built, in order, or none is trusted
    found.push(at + header.length);
    after = at + header.length;
  }
  return found.map((start, k) => {
    if (k + 1 === dirs.length) return [start, text.length];
    // The next project's part starts with a status line that names it.
    const next = text.indexOf(`'${dirs[k + 1]}/tsconfig.json'`, start);
    return [start, text.lastIndexOf("\n", next) + 1];
  }).map(([start, end]) => (end >= start ? [start, end] : null));
}

function readErrors(dir) {
  // tsc's own verdict on the project: its build info says whether it had errors.
  try {
    const info = JSON.parse(fs.readFileSync(`${dir}/tsconfig.tsbuildinfo`, "utf8"));
    return Boolean(info.errors || info.semanticErrors || info.checkPending);
  } catch (e) {
    return null;
  }
}

// A member's exit status, as tsc alone (--noEmitOnError) would end: 0 with no diagnostics and
// main.js written, 1 with diagnostics and nothing written. Both signals (the build info and the
// output) must agree, or the member gets no report.
function statusOf(dir, diagnostics) {
  const errors = readErrors(dir);
  const emitted = fs.existsSync(`${dir}/main.js`);
  if (errors === false && diagnostics === "" && emitted) return 0;
  if (errors === true && diagnostics !== "" && !emitted) return 1;
  return null;
}

function main() {
  const [tsc, ...dirs] = process.argv.slice(2);
  const result = runTsc(tsc, dirs);
  // 0: no errors, 1: errors, outputs skipped. Anything else (killed, a crash: Go exits 2 on a panic)
  // may have cut the output short: no member gets a report.
  if (result.error || (result.status !== 0 && result.status !== 1)) {
    process.stderr.write(`tsc -b ended with ${result.error || result.signal || result.status}\n`);
    process.exit(1);
  }
  const text = fs.readFileSync(OUTPUT, BYTES);
  const parts = sections(text, dirs);
  if (parts === null) {
    process.stderr.write("tsc -b did not report every project in order\n");
    process.exit(1);
  }
  dirs.forEach((dir, k) => {
    if (parts[k] === null) return;
    // As alone: paths relative to the member's folder, the box (main.ts, not <dir>/main.ts).
    const diagnostics = text.slice(...parts[k]).split(`${dir}/`).join("");
    const status = statusOf(dir, diagnostics);
    if (status === null) return;
    // The status last: batching reads a member's report only once its status file is there.
    fs.writeFileSync(`${dir}/codelm_diagnostics`, diagnostics, BYTES);
    fs.writeFileSync(`${dir}/codelm_status`, `${status}\n`);
  });
}

main();
