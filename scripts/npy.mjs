// Reads and writes NumPy .npy files (format versions 1.0, 2.0 and 3.0, C order, little endian)
// as {dtype, shape, data} with data a typed array, for scripts/ort_run.mjs.
//
// dtype names are onnxruntime's tensor type names, so a parsed file can become an ort.Tensor
// directly. float16 is carried as its raw bits in a Uint16Array (Node 20 has no Float16Array).
import { readFileSync, writeFileSync } from 'node:fs';

// numpy descr (byte order stripped) -> [onnxruntime type, typed array constructor]
const DESCR = {
  f4: ['float32', Float32Array],
  f8: ['float64', Float64Array],
  f2: ['float16', Uint16Array],
  i8: ['int64', BigInt64Array],
  u8: ['uint64', BigUint64Array],
  i4: ['int32', Int32Array],
  u4: ['uint32', Uint32Array],
  i2: ['int16', Int16Array],
  u2: ['uint16', Uint16Array],
  i1: ['int8', Int8Array],
  u1: ['uint8', Uint8Array],
  b1: ['bool', Uint8Array],
};
const TYPE_TO_DESCR = Object.fromEntries(
  Object.entries(DESCR).map(([d, [t]]) => [t, d.endsWith('1') ? `|${d}` : `<${d}`]));
const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];  // "\x93NUMPY"

export const supportedTypes = Object.keys(TYPE_TO_DESCR);

function fail(path, why) {
  throw new Error(`${path}: ${why}`);
}

export function parseNpy(buf, path = '<buffer>') {
  if (buf.length < 10 || MAGIC.some((b, i) => buf[i] !== b)) fail(path, 'not a .npy file (bad magic)');
  const major = buf[6];
  let headerLen;
  let offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    fail(path, `unsupported .npy format version ${major}.${buf[7]}`);
  }
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', offset, offset + headerLen);
  const descrM = header.match(/'descr'\s*:\s*'([^']*)'/);
  const fortranM = header.match(/'fortran_order'\s*:\s*(True|False)/);
  const shapeM = header.match(/'shape'\s*:\s*\(([^)]*)\)/);
  if (!descrM || !fortranM || !shapeM) fail(path, `cannot parse the header ${JSON.stringify(header)}`);
  const descr = descrM[1];
  if (fortranM[1] === 'True') fail(path, 'Fortran-order arrays are not supported (save a C-contiguous copy)');
  const order = descr[0];
  const code = descr.slice(1);
  if (!'<|=>'.includes(order)) fail(path, `unsupported dtype ${descr}`);
  if (order === '>' && !code.endsWith('1')) fail(path, `big-endian dtype ${descr} is not supported`);
  const entry = DESCR[code];
  if (!entry) {
    fail(path, `unsupported dtype ${descr}; supported: ${Object.values(TYPE_TO_DESCR).join(' ')}`);
  }
  const [type, Ctor] = entry;
  const shape = shapeM[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map((s) => {
    const n = Number(s.replace(/L$/, ''));
    if (!Number.isInteger(n) || n < 0) fail(path, `bad dimension ${s} in the shape`);
    return n;
  });
  const count = shape.reduce((a, b) => a * b, 1);
  const start = offset + headerLen;
  const bytes = count * Ctor.BYTES_PER_ELEMENT;
  if (buf.length - start !== bytes) {
    fail(path, `holds ${buf.length - start} data bytes, shape [${shape}] of ${type} needs ${bytes}`);
  }
  // Copy into a fresh buffer: Node's file buffers need not be aligned for the typed array.
  const data = new Ctor(count);
  new Uint8Array(data.buffer).set(buf.subarray(start, start + bytes));
  if (type === 'bool' && data.some((v) => v > 1)) fail(path, 'bool array holds values other than 0 and 1');
  return { type, shape, data };
}

export function readNpy(path) {
  return parseNpy(readFileSync(path), path);
}

export function formatNpy({ type, shape, data }) {
  const descr = TYPE_TO_DESCR[type];
  if (!descr) throw new Error(`cannot write a ${type} tensor as .npy; supported: ${supportedTypes.join(' ')}`);
  const Ctor = DESCR[descr.slice(1)][1];
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.length !== count) throw new Error(`shape [${shape}] has ${count} elements, data ${data.length}`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  // numpy pads the header with spaces so that the data starts at a multiple of 64 bytes.
  const v1 = header.length + 11 < 65536;
  const pre = v1 ? 10 : 12;
  const total = Math.ceil((pre + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - pre - header.length - 1) + '\n';
  const head = Buffer.alloc(pre);
  MAGIC.forEach((b, i) => { head[i] = b; });
  head[6] = v1 ? 1 : 2;
  head[7] = 0;
  if (v1) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  // ort hands bool outputs back as Uint8Array; other types match their constructor.
  const typed = data instanceof Ctor ? data : Ctor.from(data);
  const body = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), body]);
}

export function writeNpy(path, tensor) {
  writeFileSync(path, formatNpy(tensor));
}
