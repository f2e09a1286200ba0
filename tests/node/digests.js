// A Node.js backend's digest of each event it received: one event a line on stdin (as the
// table sent it), "<seq> <sha256 of its RFC 8785 form>" a line on stdout (docs/backend.md,
// "Where the backend stands"). The digest is taken over the event as parsed, anchor included.
"use strict";
const crypto = require("crypto");
const readline = require("readline");
const canonicalize = require("canonicalize");

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const event = JSON.parse(line);
  const digest = crypto.createHash("sha256").update(canonicalize(event), "utf8").digest("hex");
  process.stdout.write(`${event.seq} ${digest}\n`);
});
