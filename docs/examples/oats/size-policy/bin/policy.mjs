// acme.size-policy: walks its working directory (in an sf check, the Candidate's tree,
// read-only) and answers one oats v1 envelope on stdout: ok with what it counted, or a
// failure naming the limit the tree breaks. It never follows a symbolic link.
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const args = process.argv.slice(3);
const flag = (name) => {
  const at = args.indexOf(name);
  return at < 0 ? undefined : args[at + 1];
};
const answer = (envelope, status) => {
  process.stdout.write(`${JSON.stringify({ schemaVersion: 1, ...envelope })}\n`);
  process.exit(status);
};
const fail = (code, message) => answer({ ok: false, error: { code, message } }, 1);

const maxFiles = Number(flag('--max-files'));
const maxBytes = Number(flag('--max-bytes'));
if (!Number.isSafeInteger(maxFiles) || !Number.isSafeInteger(maxBytes)) {
  fail('E_BAD_ARGS', '--max-files and --max-bytes are whole numbers');
}

let files = 0;
let largest = { path: '', bytes: 0 };
const walk = (dir, prefix) => {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    const relative = prefix ? `${prefix}/${name}` : name;
    const stat = lstatSync(path);
    if (stat.isDirectory()) {
      walk(path, relative);
      continue;
    }
    files += 1;
    if (stat.size > largest.bytes) largest = { path: relative, bytes: stat.size };
  }
};
walk(process.cwd(), '');

if (files > maxFiles) fail('E_TOO_MANY_FILES', `the tree holds ${files} files; the limit is ${maxFiles}`);
if (largest.bytes > maxBytes) {
  fail('E_FILE_TOO_LARGE', `${largest.path} is ${largest.bytes} bytes; the limit is ${maxBytes}`);
}
answer({ ok: true, result: { files, largest } }, 0);
