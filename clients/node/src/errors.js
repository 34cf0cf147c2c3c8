// Every gRPC failure surfaces as a ToolnexusError subclass chosen by its status code:
// `err.code` is the code's name ('NOT_FOUND'), `err.status` its number (5), and
// `err.message` the daemon's details unchanged, so callers can match the pinned strings of docs/protocol.md §2.
import grpc from '@grpc/grpc-js';

const NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, number]) => [number, name]));

export class ToolnexusError extends Error {
  /**
   * @param {string} code a gRPC status code name, e.g. 'NOT_FOUND'
   * @param {string} message the daemon's details
   * @param {{cause?: unknown, metadata?: unknown}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = grpc.status[code] ?? grpc.status.UNKNOWN;
    this.details = message;
    if (extra.metadata !== undefined) this.metadata = extra.metadata;
  }

  toString() {
    return `${this.name} [${this.code}]: ${this.message}`;
  }
}

const define = (name, code) => {
  const cls = { [name]: class extends ToolnexusError {} }[name];
  cls.code = code;
  return cls;
};

export const Cancelled = define('Cancelled', 'CANCELLED');
export const Unknown = define('Unknown', 'UNKNOWN');
export const InvalidArgument = define('InvalidArgument', 'INVALID_ARGUMENT');
export const DeadlineExceeded = define('DeadlineExceeded', 'DEADLINE_EXCEEDED');
export const NotFound = define('NotFound', 'NOT_FOUND');
export const AlreadyExists = define('AlreadyExists', 'ALREADY_EXISTS');
export const PermissionDenied = define('PermissionDenied', 'PERMISSION_DENIED');
export const ResourceExhausted = define('ResourceExhausted', 'RESOURCE_EXHAUSTED');
export const FailedPrecondition = define('FailedPrecondition', 'FAILED_PRECONDITION');
export const Aborted = define('Aborted', 'ABORTED');
export const OutOfRange = define('OutOfRange', 'OUT_OF_RANGE');
export const Unimplemented = define('Unimplemented', 'UNIMPLEMENTED');
export const Internal = define('Internal', 'INTERNAL');
export const Unavailable = define('Unavailable', 'UNAVAILABLE');
export const DataLoss = define('DataLoss', 'DATA_LOSS');
export const Unauthenticated = define('Unauthenticated', 'UNAUTHENTICATED');

const BY_CODE = Object.fromEntries([
  Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
  ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal, Unavailable,
  DataLoss, Unauthenticated,
].map((cls) => [cls.code, cls]));

/** The ToolnexusError subclass for a status code name (or number). */
export function errorFor(code, message, extra) {
  const name = typeof code === 'number' ? (NAMES[code] ?? 'UNKNOWN') : code;
  const cls = BY_CODE[name] ?? ToolnexusError;
  return new cls(name, message, extra);
}

/** Translate an error of @grpc/grpc-js (a ServiceError); other errors pass through unchanged. */
export function fromGrpcError(err) {
  if (err instanceof ToolnexusError) return err;
  if (err === null || typeof err !== 'object' || typeof err.code !== 'number') return err;
  const details = typeof err.details === 'string' && err.details ? err.details : String(err.message ?? err);
  return errorFor(err.code, details, { cause: err, metadata: err.metadata });
}
