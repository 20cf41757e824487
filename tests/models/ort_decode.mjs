// The greedy loops of examples/python/generate.py and transcribe.py on onnxruntime-node (CPU),
// to make the token ids their test compares against (tests/models/make_example_refs.py runs it;
// never `make test`) and for bench/decode_bench.py. Prints one JSON object: the tokens, whether
// the end token stopped the loop, each step's margin between the largest and second largest
// logit, and each session.run call's wall time (`loops`, below).
//
//   node tests/models/ort_decode.mjs generate --model kv_decoder.onnx \
//        --model kv_decoder_with_past.onnx --prompt 3,141,59 --max-new 16 [--eos ID]
//   node tests/models/ort_decode.mjs generate --model kv_decoder_merged.onnx --prompt ...
//   node tests/models/ort_decode.mjs transcribe --encoder E.onnx --decoder D.onnx \
//        --decoder-with-past P.onnx --features F.npy --prompt 157,158,159 --max-new 24 [--eos ID]
//   options: --opt disabled|basic|extended|all (default disabled), --threads N (intra-op
//   threads, default 1), --repeat N (default 0: the loop runs once; N > 0: one untimed warm-up
//   loop, then N more, each reported)
//
// `loops` has one entry per reported loop: `step_us` (each decoder call's session.run, the
// first call, which runs the prompt, at index 0), `encoder_us` (transcribe) and `tokens`; the
// warm-up loop's entry is `warmup` (null without --repeat). The top-level tokens and margins are
// the first loop's.
//
// onnxruntime-node is the one scripts/ort.sh installs: $UBFUSE_ORT_DIR, else
// ${XDG_CACHE_HOME:-~/.cache}/ubfuse/ort-${UBFUSE_ORT_VERSION:-1.30.0} (`scripts/ort.sh --install`).
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { readNpy } from '../../scripts/npy.mjs';

// Exit status 2: bad arguments or a model onnxruntime refuses; 3: onnxruntime-node not installed.
function die(msg, status = 2) {
  process.stderr.write(`ort_decode: ${msg}\n`);
  process.exit(status);
}

function loadOrt() {
  const version = process.env.UBFUSE_ORT_VERSION ?? '1.30.0';
  const cache = process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
  const dir = process.env.UBFUSE_ORT_DIR ?? join(cache, 'ubfuse', `ort-${version}`);
  try {
    return createRequire(join(resolve(dir), 'package.json'))('onnxruntime-node');
  } catch (e) {
    return die(`cannot load onnxruntime-node from ${dir} (run scripts/ort.sh --install): ${e.message}`, 3);
  }
}

function parseArgs(argv) {
  const a = { cmd: argv[0], models: [], opt: 'disabled', threads: 1, eos: null, maxNew: 16, repeat: 0 };
  const ids = (s) => s.split(',').filter((t) => t).map((t) => {
    const n = Number(t);
    if (!Number.isInteger(n) || n < 0) die(`bad token id '${t}'`);
    return n;
  });
  for (let i = 1; i < argv.length; i++) {
    const f = argv[i];
    const v = argv[++i];
    if (v === undefined) die(`${f} needs a value`);
    switch (f) {
      case '--model': a.models.push(v); break;
      case '--encoder': a.encoder = v; break;
      case '--decoder': a.decoder = v; break;
      case '--decoder-with-past': a.decoderWithPast = v; break;
      case '--features': a.features = v; break;
      case '--prompt': a.prompt = ids(v); break;
      case '--max-new': a.maxNew = Number(v); break;
      case '--eos': a.eos = Number(v); break;
      case '--opt': a.opt = v; break;
      case '--threads': a.threads = Number(v); break;
      case '--repeat': a.repeat = Number(v); break;
      default: die(`unknown option ${f}`);
    }
  }
  if (!['generate', 'transcribe'].includes(a.cmd)) die('the first argument is generate or transcribe');
  if (!a.prompt?.length) die('--prompt wants at least one token id');
  if (!Number.isInteger(a.threads) || a.threads < 1) die('--threads wants a positive integer');
  if (!Number.isInteger(a.repeat) || a.repeat < 0) die('--repeat wants an integer >= 0');
  if (!Number.isInteger(a.maxNew) || a.maxNew < 1) die('--max-new wants a positive integer');
  return a;
}

// Index of the largest value (the first on a tie, as numpy.argmax) and its lead over the next.
function top2(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  let second = -Infinity;
  for (let i = 0; i < row.length; i++) if (i !== best && row[i] > second) second = row[i];
  const margin = row[best] - second;
  return { token: best, margin, relative: margin / Math.max(Math.abs(row[best]), Math.abs(second)) };
}

function lastRow(logits) {
  const [, seq, vocab] = logits.dims;
  return logits.data.subarray((seq - 1) * vocab, seq * vocab);  // batch 1
}

// session.run's wall time in microseconds: the call and its outputs, not making the feeds.
async function timed(times, run) {
  const t0 = process.hrtime.bigint();
  const out = await run();
  times.push(Number(process.hrtime.bigint() - t0) / 1e3);
  return out;
}

const ids = (ort, tokens) => new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, tokens.length]);

// The shared greedy loop: `first` runs the prompt, `step(token, previous outputs)` one token;
// both time their session.run into `times`.
async function greedy(a, first, step) {
  const tokens = [];
  const margins = [];
  const times = [];
  let out = await first(times);
  for (;;) {
    const t = top2(lastRow(out.logits));
    tokens.push(t.token);
    margins.push(t);
    if (a.eos !== null && t.token === a.eos) return { tokens, margins, stopped_at_eos: true, step_us: times };
    if (tokens.length >= a.maxNew) return { tokens, margins, stopped_at_eos: false, step_us: times };
    out = await step(t.token, out, times);
  }
}

async function session(ort, a, path) {
  return ort.InferenceSession.create(path, {
    executionProviders: ['cpu'], graphOptimizationLevel: a.opt, intraOpNumThreads: a.threads,
    interOpNumThreads: 1, executionMode: 'sequential', logSeverityLevel: 3,
  });
}

async function generate(ort, a) {
  if (a.models.length < 1 || a.models.length > 2) die('give --model once (merged) or twice');
  const sessions = [];
  for (const m of a.models) sessions.push(await session(ort, a, m));
  const [firstS, stepS] = [sessions[0], sessions[sessions.length - 1]];
  const merged = stepS.inputNames.includes('use_cache_branch');
  const pastMeta = stepS.inputMetadata.filter((m) => m.name.startsWith('past_key_values.'));
  const first = (times) => {
    const feeds = { input_ids: ids(ort, a.prompt) };
    if (merged) {  // the merged model's first call: empty past, no-cache branch
      for (const m of pastMeta) feeds[m.name] = new ort.Tensor('float32', new Float32Array(0), [1, m.shape[1], 0, m.shape[3]]);
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.from([0]), [1]);
    }
    return timed(times, () => firstS.run(feeds));
  };
  const step = (token, prev, times) => {
    const feeds = { input_ids: ids(ort, [token]) };
    for (const m of pastMeta) feeds[m.name] = prev[`present.${m.name.slice('past_key_values.'.length)}`];
    if (merged) feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.from([1]), [1]);
    return timed(times, () => stepS.run(feeds));
  };
  return () => greedy(a, first, step);
}

async function transcribe(ort, a) {
  for (const k of ['encoder', 'decoder', 'decoderWithPast', 'features']) if (!a[k]) die(`missing --${k}`);
  const [enc, dec, decPast] = [await session(ort, a, a.encoder), await session(ort, a, a.decoder),
    await session(ort, a, a.decoderWithPast)];
  const f = readNpy(a.features);  // [n_mels, frames] from the Python frontend
  const features = new ort.Tensor('float32', f.data, [1, ...f.shape]);
  const pastNames = decPast.inputNames.filter((n) => n.startsWith('past_key_values.'));
  let cross = null;
  let hidden = null;
  const first = async (times) => {
    const feeds = { input_ids: ids(ort, a.prompt), encoder_hidden_states: hidden };
    const out = await timed(times, () => dec.run(feeds));
    // The cross-attention K/V come from this call only and are fed to every later one.
    cross = Object.fromEntries(pastNames.filter((n) => n.includes('.encoder.'))
      .map((n) => [n, out[`present.${n.slice('past_key_values.'.length)}`]]));
    return out;
  };
  const step = (token, prev, times) => {
    const feeds = { input_ids: ids(ort, [token]), ...cross };
    for (const n of pastNames.filter((p) => p.includes('.decoder.'))) {
      feeds[n] = prev[`present.${n.slice('past_key_values.'.length)}`];
    }
    return timed(times, () => decPast.run(feeds));
  };
  // One loop: the encoder once over the features (timed on its own), then the decoder.
  return async () => {
    const encoderUs = [];
    hidden = (await timed(encoderUs, () => enc.run({ input_features: features }))).last_hidden_state;
    const r = await greedy(a, first, step);
    return { ...r, encoder_us: encoderUs[0], encoder_frames: hidden.dims[1] };
  };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const loop = a.cmd === 'generate' ? await generate(ort, a) : await transcribe(ort, a);
  const timing = (x) => {
    const e = { step_us: x.step_us, tokens: x.tokens, stopped_at_eos: x.stopped_at_eos };
    if (x.encoder_us !== undefined) e.encoder_us = x.encoder_us;
    return e;
  };
  const warmup = a.repeat > 0 ? timing(await loop()) : null;
  const loops = [];
  for (let i = 0; i < Math.max(1, a.repeat); i++) loops.push(await loop());
  const r = loops[0];
  const report = {
    onnxruntime: ort.env.versions?.node ?? 'unknown', opt: a.opt, threads: a.threads,
    prompt: a.prompt, max_new: a.maxNew, eos: a.eos, tokens: r.tokens,
    stopped_at_eos: r.stopped_at_eos,
    margins: r.margins.map((m) => m.margin), relative_margins: r.margins.map((m) => m.relative),
    repeat: a.repeat, warmup, loops: loops.map(timing),
  };
  if (r.encoder_frames !== undefined) report.encoder_frames = r.encoder_frames;
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((e) => die(e.stack ?? String(e)));
