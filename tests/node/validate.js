// A JavaScript backend validating what it receives against the contract's schemas, loaded by
// $id as docs/backend.md says: argv = the schema files, then the $id to validate against;
// stdin = one JSON message a line; stdout = "ok" or the errors, one line per message.
"use strict";
const fs = require("fs");
const readline = require("readline");
const Ajv2020 = require("ajv/dist/2020");

const files = process.argv.slice(2, -1);
const id = process.argv[process.argv.length - 1];
const ajv = new Ajv2020({ strict: false, validateFormats: false });
for (const file of files) ajv.addSchema(JSON.parse(fs.readFileSync(file, "utf8")));
const validate = ajv.getSchema(id);
if (!validate) throw new Error(`no schema with $id ${id}`);
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const ok = validate(JSON.parse(line));
  process.stdout.write(ok ? "ok\n" : `${JSON.stringify(validate.errors)}\n`);
});
