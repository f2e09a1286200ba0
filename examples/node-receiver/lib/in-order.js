'use strict';
// One table's events as one backend receives them: each stored once, in seq order, no gap
// (docs/backend.md, "The in-order receiver", written again in JavaScript), kept in a JSON
// Lines file that is appended and fsynced before the event is acknowledged.

const crypto = require('node:crypto');
const fs = require('node:fs');
const canonicalize = require('canonicalize');

const RESEND_EVERY_S = 5; // a table serves one resend request per 5 s per transport

class InOrder {
  constructor(file) {
    this.file = file;
    this.seen = new Map(); // id -> RFC 8785 form of the stored body
    this.nextSeq = 1; // the first seq not stored yet
    this.lastStored = null; // event nextSeq - 1, for `held`
    this.highestSeen = 0;
    this.askedAt = null;
    this.heldMoved = true; // tell the table where we stand at the first chance
    if (fs.existsSync(file)) {
      for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
        if (!line) continue;
        const event = JSON.parse(line);
        this.seen.set(event.id, canonicalize(event));
        this.nextSeq = event.seq + 1;
        this.lastStored = event;
      }
    }
    this.highestSeen = this.nextSeq - 1;
    this.fd = fs.openSync(file, 'a');
  }

  /**
   * Take one verified event. Returns {stored, conflict, ask}: whether it was stored now,
   * whether it is a repeat with another body (keep the first; raise an alarm), and the seq
   * to ask a resend from (or null).
   */
  accept(event, nowS) {
    this.highestSeen = Math.max(this.highestSeen, event.seq);
    const first = this.seen.get(event.id);
    if (first !== undefined) {
      return { stored: false, conflict: first !== canonicalize(event), ask: null };
    }
    if (event.seq === this.nextSeq) {
      fs.writeSync(this.fd, `${JSON.stringify(event)}\n`);
      fs.fsyncSync(this.fd);
      this.seen.set(event.id, canonicalize(event));
      this.nextSeq += 1;
      this.lastStored = event;
      this.heldMoved = true;
      return { stored: true, conflict: false, ask: null };
    }
    // A gap: nextSeq..seq-1 are missing. Drop this one (the resend brings it again, in
    // order) and ask, at most once per RESEND_EVERY_S.
    return { stored: false, conflict: false, ask: this.due(nowS) };
  }

  /** While a gap is open, the seq to ask from once the last ask is RESEND_EVERY_S old. */
  due(nowS) {
    if (this.highestSeen < this.nextSeq) return null;
    if (this.askedAt !== null && nowS - this.askedAt < RESEND_EVERY_S) return null;
    this.askedAt = nowS;
    return this.nextSeq;
  }

  /** After a (re)connect without our session, whatever was queued for us is gone: ask. */
  connected(sessionPresent, nowS) {
    if (sessionPresent) return null;
    this.askedAt = nowS;
    return this.nextSeq;
  }

  /** Where we stand: {seq, sha256 of event seq's RFC 8785 form} ({seq: 0} with none). */
  held() {
    this.heldMoved = false;
    if (this.lastStored === null) return { seq: 0 };
    const digest = crypto.createHash('sha256')
      .update(canonicalize(this.lastStored), 'utf8').digest('hex');
    return { seq: this.nextSeq - 1, sha256: digest };
  }

  close() {
    fs.closeSync(this.fd);
  }
}

module.exports = { InOrder, RESEND_EVERY_S };
