'use strict';
// The events' JSON Schemas (controller/table/schemas/, draft 2020-12): the envelope, then the
// schema of the event's type.

const fs = require('node:fs');
const path = require('node:path');
const Ajv2020 = require('ajv/dist/2020');

const BASE = 'https://pokdeng-table.invalid/schemas/';

function loadSchemas(dir) {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.json'))) {
    ajv.addSchema(JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')));
  }
  const envelope = ajv.getSchema(`${BASE}envelope.json`);
  if (!envelope) throw new Error(`${dir}: no envelope.json: not the table's schema folder`);
  /** The problems of `event` against its schemas, as text; [] when it matches. */
  return function problems(event) {
    if (!envelope(event)) return envelope.errors.map(describe);
    const ofType = ajv.getSchema(`${BASE}${event.type}.json`);
    if (!ofType) return [`no schema for type ${JSON.stringify(event.type)}`];
    return ofType(event) ? [] : ofType.errors.map(describe);
  };
}

function describe(error) {
  return `${error.instancePath || '(event)'}: ${error.message}`;
}

module.exports = { loadSchemas };
