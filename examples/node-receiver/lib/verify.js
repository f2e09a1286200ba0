'use strict';
// What a backend checks before it stores anything (docs/durability.md, "Signing, and what a
// backend checks"): the signature over the exact bytes received, then that the events are the
// signing table's own.

const crypto = require('node:crypto');

const WINDOW_S = 300; // HTTP: refuse timestamps further than this from our clock (either way)

/** The table signed exactly these bytes at `timestamp` (within `windowS`, unless null). */
function signatureOk(secret, timestamp, signature, body, nowS, windowS = WINDOW_S) {
  if (typeof timestamp !== 'string' || !/^[0-9]+$/.test(timestamp)) return false;
  if (typeof signature !== 'string') return false;
  if (windowS !== null && Math.abs(nowS - Number(timestamp)) > windowS) return false;
  const mac = crypto.createHmac('sha256', secret)
    .update(Buffer.concat([Buffer.from(`${timestamp}.`, 'ascii'), body]))
    .digest('hex');
  const expected = Buffer.from(`sha256=${mac}`, 'ascii');
  const given = Buffer.from(signature, 'ascii');
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

/** The ids of events that are not `table`'s own: a table's secret vouches for its own only. */
function foreignEvents(events, table) {
  return events
    .filter((e) => e === null || typeof e !== 'object' || e.table !== table
      || e.id !== `${table}:${e.seq}`)
    .map((e) => String(e && e.id));
}

module.exports = { WINDOW_S, signatureOk, foreignEvents };
