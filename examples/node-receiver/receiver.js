'use strict';
// A game backend for pokdeng tables, written from docs/backend.md and docs/durability.md:
// it takes the events over HTTP (the table's webhook) and/or MQTT (a persistent session),
// checks each message's signature and each event against the JSON Schemas, stores every event
// once by id, in seq order, in a JSON Lines file per transport and table, tells the table where
// it stands (`held`), and asks for resends when something is missing.
//
//   node receiver.js --store DIR --secret T01=/path/to/secret [--secret T02=…]
//                    [--http-port 8000] [--http-host 127.0.0.1]
//                    [--mqtt-url mqtt://127.0.0.1:1883] [--mqtt-client-id backend]
//                    [--mqtt-username backend --mqtt-password-file FILE] [--mqtt-ca FILE]
//                    [--prefix pokdeng] [--schemas DIR] [--session-expiry-s 604800]
//
// Each transport is a backend of its own (DIR/http/T01.jsonl, DIR/mqtt/T01.jsonl); a studio
// runs one of them. Alarms (an id with two bodies, an event failing its schema, a bad
// signature, another table's events) are written to DIR/alarms.jsonl and stderr. It logs one
// JSON object a line on stdout.

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const mqtt = require('mqtt');

const { InOrder } = require('./lib/in-order');
const { loadSchemas } = require('./lib/schemas');
const { WINDOW_S, signatureOk, foreignEvents } = require('./lib/verify');

const MAX_BODY = 16 * 1024 * 1024;

function parseArgs(argv) {
  const options = {
    secrets: new Map(), httpHost: '127.0.0.1', prefix: 'pokdeng', mqttClientId: 'backend',
    sessionExpiryS: 7 * 86400,
    schemas: path.join(__dirname, '..', '..', 'controller', 'table', 'schemas'),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag}: needs a value`);
    switch (flag) {
      case '--store': options.store = value; break;
      case '--secret': {
        const [table, file] = value.split(/=(.*)/s);
        if (!table || !file) throw new Error(`--secret ${value}: expected TABLE=FILE`);
        options.secrets.set(table, fs.readFileSync(file, 'utf8').replace(/\r?\n$/, ''));
        break;
      }
      case '--http-port': options.httpPort = Number(value); break;
      case '--http-host': options.httpHost = value; break;
      case '--mqtt-url': options.mqttUrl = value; break;
      case '--mqtt-client-id': options.mqttClientId = value; break;
      case '--mqtt-username': options.mqttUsername = value; break;
      case '--mqtt-password-file':
        options.mqttPassword = fs.readFileSync(value, 'utf8').replace(/\r?\n$/, '');
        break;
      case '--mqtt-ca': options.mqttCa = fs.readFileSync(value); break;
      case '--prefix': options.prefix = value; break;
      case '--schemas': options.schemas = value; break;
      case '--session-expiry-s': options.sessionExpiryS = Number(value); break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  if (!options.store) throw new Error('--store DIR is required');
  if (options.secrets.size === 0) throw new Error('--secret TABLE=FILE is required (one per table)');
  if (options.httpPort === undefined && !options.mqttUrl) {
    throw new Error('give --http-port and/or --mqtt-url');
  }
  return options;
}

function say(what, fields = {}) {
  process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), what, ...fields })}\n`);
}

class Backend {
  /** One transport's store: an InOrder per table. */
  constructor(transport, options, problems, alarm) {
    this.transport = transport;
    this.dir = path.join(options.store, transport);
    fs.mkdirSync(this.dir, { recursive: true });
    this.problems = problems;
    this.alarm = alarm;
    this.tables = new Map();
  }

  table(table) {
    if (!this.tables.has(table)) {
      this.tables.set(table, new InOrder(path.join(this.dir, `${table}.jsonl`)));
    }
    return this.tables.get(table);
  }

  /** Verified events of `table`: checked against the schemas, stored in order. Returns the
   *  seq to ask a resend from, or null. */
  take(table, events, nowS) {
    const inOrder = this.table(table);
    let ask = null;
    for (const event of events) {
      const problems = this.problems(event);
      if (problems.length > 0) {
        // The table signed it: it is the table's record, and answering an error would hold
        // back every event behind it. Store it, alarm, and pay on nothing until someone looks
        // (most likely our schemas are older than the table's software).
        this.alarm('schema', { transport: this.transport, id: event && event.id, problems });
      }
      if (!event || typeof event.seq !== 'number') continue; // the envelope check alarmed
      const result = inOrder.accept(event, nowS);
      if (result.conflict) {
        this.alarm('two bodies', { transport: this.transport, id: event.id });
      }
      if (result.ask !== null) ask = result.ask;
    }
    return ask;
  }
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  fs.mkdirSync(options.store, { recursive: true });
  const alarms = fs.openSync(path.join(options.store, 'alarms.jsonl'), 'a');
  const alarm = (kind, fields) => {
    const line = JSON.stringify({ at: new Date().toISOString(), alarm: kind, ...fields });
    fs.writeSync(alarms, `${line}\n`);
    process.stderr.write(`ALARM ${line}\n`);
  };
  const problems = loadSchemas(options.schemas);
  const closers = [];
  if (options.httpPort !== undefined) {
    closers.push(serveHttp(options, new Backend('http', options, problems, alarm), alarm));
  }
  if (options.mqttUrl) {
    closers.push(subscribeMqtt(options, new Backend('mqtt', options, problems, alarm), alarm));
  }
  const stop = () => {
    say('stopping');
    Promise.all(closers.map((close) => close())).then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// --- HTTP: the table POSTs signed batches; the answer says where we stand ---------------

function serveHttp(options, backend, alarm) {
  const server = http.createServer((request, response) => {
    const chunks = [];
    let size = 0;
    request.on('data', (chunk) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    request.on('end', () => {
      const [status, answer] = size > MAX_BODY
        ? [413, { error: 'batch too large' }]
        : httpBatch(options, backend, alarm, request.headers, Buffer.concat(chunks));
      const body = JSON.stringify(answer);
      response.writeHead(status, { 'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body) });
      response.end(body);
    });
  });
  server.listen(options.httpPort, options.httpHost, () => {
    say('http listening', { host: options.httpHost, port: server.address().port });
  });
  return () => new Promise((resolve) => {
    server.close(resolve);
    server.closeAllConnections();
  });
}

/** One POST: [status, answer body]. */
function httpBatch(options, backend, alarm, headers, body) {
  const table = headers['x-pokdeng-table'];
  const secret = options.secrets.get(table);
  if (secret === undefined) {
    // No secret, no way to check the signature: 401 (the table shows "refused: check the
    // secret" and keeps retrying, losing nothing, until this backend knows the table).
    alarm('unknown table', { transport: 'http', table });
    return [401, { error: `unknown table ${JSON.stringify(table)}` }];
  }
  const nowS = Date.now() / 1000;
  if (!signatureOk(secret, headers['x-pokdeng-timestamp'], headers['x-pokdeng-signature'],
    body, nowS, WINDOW_S)) {
    alarm('bad signature', { transport: 'http', table });
    return [401, { error: 'bad signature' }];
  }
  let batch;
  try {
    batch = JSON.parse(body.toString('utf8'));
  } catch (error) {
    alarm('not JSON', { transport: 'http', table, error: error.message });
    return [400, { error: 'not JSON' }];
  }
  const events = Array.isArray(batch.events) ? batch.events : [];
  const foreign = foreignEvents(events, table);
  if (foreign.length > 0) {
    alarm('events of another table', { transport: 'http', table, ids: foreign });
    return [403, { error: 'events of another table', ids: foreign }];
  }
  let ask = backend.take(table, events, nowS);
  const inOrder = backend.table(table);
  if (ask === null) ask = inOrder.due(nowS);
  const answer = { held: inOrder.held() };
  if (ask !== null) {
    // The table serves one request per 5 s; a later one waits for it (the lowest seq wins),
    // so an answer is never lost even when the table has nothing more to send.
    answer.resend_from = ask;
    say('resend asked', { transport: 'http', table, from_seq: ask });
  }
  return [200, answer];
}

// --- MQTT: a persistent session, QoS 1; held retained; resends on the table's topic -------

function subscribeMqtt(options, backend, alarm) {
  const client = mqtt.connect(options.mqttUrl, {
    clientId: options.mqttClientId, protocolVersion: 5, clean: false,
    properties: { sessionExpiryInterval: options.sessionExpiryS },
    username: options.mqttUsername, password: options.mqttPassword, ca: options.mqttCa,
    reconnectPeriod: 1000,
  });
  const events = `${options.prefix}/+/events`;
  const tellHeld = (table) => {
    client.publish(`${options.prefix}/${table}/held`,
      JSON.stringify(backend.table(table).held()), { qos: 1, retain: true });
  };
  const ask = (table, fromSeq) => {
    if (fromSeq === null) return;
    say('resend asked', { transport: 'mqtt', table, from_seq: fromSeq });
    // QoS 1 to the table's resend topic: the table's persistent session keeps it while the
    // table is offline, and the table answers when it connects.
    client.publish(`${options.prefix}/${table}/resend`, JSON.stringify({ from_seq: fromSeq }),
      { qos: 1 });
  };
  client.on('connect', (connack) => {
    const present = Boolean(connack.sessionPresent);
    say('mqtt connected', { session_present: present });
    if (!present) client.subscribe(events, { qos: 1 });
    const nowS = Date.now() / 1000;
    for (const table of options.secrets.keys()) {
      ask(table, backend.table(table).connected(present, nowS));
      tellHeld(table);
    }
  });
  client.on('error', (error) => say('mqtt error', { error: error.message }));
  // Handled before the PUBACK goes out: a stored event is on disk when the broker forgets it.
  client.on('message', (topic, payload, packet) => {
    const table = topic.split('/').at(-2);
    const secret = options.secrets.get(table);
    if (secret === undefined) {
      alarm('unknown table', { transport: 'mqtt', topic });
      return;
    }
    const props = (packet.properties && packet.properties.userProperties) || {};
    const first = (value) => (Array.isArray(value) ? value[0] : value);
    // window null: a broker keeps QoS 1 messages for an absent subscriber, so a genuine event
    // can come later than any window; de-duplication by id refuses replays
    if (!signatureOk(secret, first(props['x-pokdeng-timestamp']),
      first(props['x-pokdeng-signature']), payload, Date.now() / 1000, null)) {
      alarm('bad signature', { transport: 'mqtt', topic });
      return;
    }
    let event;
    try {
      event = JSON.parse(payload.toString('utf8'));
    } catch (error) {
      alarm('not JSON', { transport: 'mqtt', topic, error: error.message });
      return;
    }
    if (foreignEvents([event], table).length > 0) {
      alarm('events of another table', { transport: 'mqtt', topic, id: event && event.id });
      return;
    }
    ask(table, backend.take(table, [event], Date.now() / 1000));
  });
  // Once a second: ask again while a gap stays open (the next event may be minutes away on
  // a paused table), and tell the table where we stand when it moved.
  const timer = setInterval(() => {
    if (!client.connected) return;
    const nowS = Date.now() / 1000;
    for (const [table, inOrder] of backend.tables) {
      ask(table, inOrder.due(nowS));
      if (inOrder.heldMoved) tellHeld(table);
    }
  }, 1000);
  return () => new Promise((resolve) => {
    clearInterval(timer);
    client.end(false, {}, resolve); // the session stays on the broker: it queues for us
  });
}

try {
  main();
} catch (error) {
  process.stderr.write(`pokdeng node receiver: ${error.message}\n`);
  process.exit(2);
}
