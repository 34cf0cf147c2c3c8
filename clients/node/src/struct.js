// google.protobuf.Struct <-> plain JSON values. Struct carries every JSON-shaped value of the
// contract (tool arguments, metadata, Request.data, model request and response bodies).
// Going in, values are JSON-normalised the way JSON.stringify would (toJSON, undefined keys
// dropped, non-finite numbers as null); anything JSON cannot express is a TypeError.

/** A Struct message holding a plain object (null/undefined → null, i.e. the field stays unset). */
export function toStruct(value) {
  if (value === null || value === undefined) return null;
  const json = normalise(value, 'value');
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new TypeError(`a JSON object is required here, got ${describe(json)}`);
  }
  return structOf(json);
}

/** The plain object a Struct holds (null for an absent Struct). */
export function fromStruct(struct) {
  if (!struct) return null;
  const out = {};
  for (const [key, value] of Object.entries(struct.fields ?? {})) out[key] = fromValue(value);
  return out;
}

function structOf(object) {
  const fields = {};
  for (const [key, value] of Object.entries(object)) fields[key] = valueOf(value);
  return { fields };
}

function valueOf(value) {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  switch (typeof value) {
    case 'number': return { numberValue: value };
    case 'string': return { stringValue: value };
    case 'boolean': return { boolValue: value };
    default:
      if (Array.isArray(value)) return { listValue: { values: value.map(valueOf) } };
      return { structValue: structOf(value) };
  }
}

const KINDS = ['numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue', 'nullValue'];

function fromValue(value) {
  if (!value) return null;
  // decoded messages name their oneof member in `kind`; a Value built in JS has just the member
  const kind = value.kind ?? KINDS.find((k) => value[k] !== undefined && value[k] !== null);
  switch (kind) {
    case 'numberValue': return value.numberValue;
    case 'stringValue': return value.stringValue;
    case 'boolValue': return value.boolValue;
    case 'structValue': return fromStruct(value.structValue);
    case 'listValue': return (value.listValue?.values ?? []).map(fromValue);
    default: return null;
  }
}

function normalise(value, path, seen = new Set()) {
  if (value !== null && typeof value === 'object' && typeof value.toJSON === 'function') {
    value = value.toJSON();
  }
  if (value === null) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'bigint':
      return Number(value);
    case 'object': {
      if (seen.has(value)) throw new TypeError(`${path} is a circular structure`);
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          return value.map((item, i) => {
            const json = normalise(item, `${path}[${i}]`, seen);
            return json === undefined ? null : json;
          });
        }
        const out = {};
        for (const [key, item] of Object.entries(value)) {
          const json = normalise(item, `${path}.${key}`, seen);
          if (json !== undefined) out[key] = json;
        }
        return out;
      } finally {
        seen.delete(value);
      }
    }
    default:
      return undefined; // undefined, functions, symbols: dropped (null inside arrays), like JSON
  }
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
