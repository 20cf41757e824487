// Runs an ONNX model on onnxruntime-node (CPU) with .npy inputs and writes its outputs as .npy;
// optionally times it. Called by scripts/ort.sh, which installs onnxruntime-node on demand and
// sets UBFUSE_ORT_DIR to the folder holding its node_modules. See `--help`.
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { readNpy, writeNpy } from './npy.mjs';

const USAGE = `usage: ort_run.mjs MODEL.onnx [options]
  --in NAME=FILE.npy      an input (repeat for each); every model input must be given
  --out-dir DIR           write each output as DIR/<output name>.npy
  --outputs A,B           fetch only these outputs (default: all)
  --opt LEVEL             graph optimization: all (default), extended, basic, disabled
  --threads N             intra-op threads (default 2); inter-op is 1, sequential execution
  --time N                run N timed runs after the warm-up ones and report best/median ms
  --warmup N              warm-up runs before timing (default 3)
  --json                  print one JSON object (timings, outputs, version) on stdout
  --save-optimized FILE   write the graph onnxruntime runs after its optimizations
  --config KEY=VALUE      a session config entry (e.g. session.intra_op.allow_spinning=0)
  --list                  print the model's inputs and outputs and exit
  --verbose               onnxruntime's warnings and info on stderr`;

function die(msg) {
  process.stderr.write(`ort_run: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const a = {
    model: null, inputs: [], outDir: null, outputs: null, opt: 'all', threads: 2, time: 0,
    warmup: 3, json: false, saveOptimized: null, config: {}, list: false, verbose: false,
  };
  const value = (i, flag) => {
    if (i + 1 >= argv.length) die(`${flag} needs a value`);
    return argv[i + 1];
  };
  const count = (s, flag, min) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < min) die(`${flag} wants an integer >= ${min}, got '${s}'`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const f = argv[i];
    switch (f) {
      case '--in': {
        const v = value(i++, f);
        const eq = v.indexOf('=');
        if (eq <= 0) die(`--in wants NAME=FILE.npy, got '${v}'`);
        a.inputs.push([v.slice(0, eq), v.slice(eq + 1)]);
        break;
      }
      case '--out-dir': a.outDir = value(i++, f); break;
      case '--outputs': a.outputs = value(i++, f).split(',').filter((s) => s); break;
      case '--opt': a.opt = value(i++, f); break;
      case '--threads': a.threads = count(value(i++, f), f, 1); break;
      case '--time': a.time = count(value(i++, f), f, 1); break;
      case '--warmup': a.warmup = count(value(i++, f), f, 0); break;
      case '--json': a.json = true; break;
      case '--save-optimized': a.saveOptimized = value(i++, f); break;
      case '--config': {
        const v = value(i++, f);
        const eq = v.indexOf('=');
        if (eq <= 0) die(`--config wants KEY=VALUE, got '${v}'`);
        a.config[v.slice(0, eq)] = v.slice(eq + 1);
        break;
      }
      case '--list': a.list = true; break;
      case '--verbose': a.verbose = true; break;
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      default:
        if (f.startsWith('-')) die(`unknown option ${f}\n${USAGE}`);
        if (a.model) die(`one model only (got '${a.model}' and '${f}')`);
        a.model = f;
    }
  }
  if (!a.model) die(`no model given\n${USAGE}`);
  if (!['all', 'extended', 'basic', 'disabled'].includes(a.opt)) {
    die(`--opt wants all, extended, basic or disabled, got '${a.opt}'`);
  }
  return a;
}

function loadOrt() {
  const dir = process.env.UBFUSE_ORT_DIR;
  if (!dir) die('UBFUSE_ORT_DIR is not set: run this through scripts/ort.sh, which installs onnxruntime-node');
  try {
    return createRequire(join(resolve(dir), 'package.json'))('onnxruntime-node');
  } catch (e) {
    die(`cannot load onnxruntime-node from ${dir}: ${e.message}`);
  }
}

// "a.b.c" = v -> {a: {b: {c: v}}}: onnxruntime-common flattens `extra` back into config keys.
function nestConfig(flat) {
  const out = {};
  for (const [k, v] of Object.entries(flat)) {
    const parts = k.split('.');
    let o = out;
    for (const p of parts.slice(0, -1)) o = o[p] ??= {};
    o[parts[parts.length - 1]] = v;
  }
  return out;
}

function describe(meta) {
  if (!meta.isTensor) return `${meta.name}: (not a tensor)`;
  return `${meta.name}: ${meta.type} [${meta.shape.map((d) => (d === -1 ? '?' : d)).join(', ')}]`;
}

function fileName(name) {
  return `${name.replace(/[^A-Za-z0-9._-]/g, '_')}.npy`;
}

function median(xs) {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: a.opt,
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: a.verbose ? 1 : 3,
  };
  if (a.saveOptimized) options.optimizedModelFilePath = resolve(a.saveOptimized);
  if (Object.keys(a.config).length) options.extra = nestConfig(a.config);

  const t0 = performance.now();
  let session;
  try {
    session = await ort.InferenceSession.create(a.model, options);
  } catch (e) {
    die(`onnxruntime cannot load ${a.model}: ${e.message}`);
  }
  const loadMs = performance.now() - t0;
  if (a.list) {
    process.stdout.write(`inputs:\n${session.inputMetadata.map((m) => `  ${describe(m)}`).join('\n')}\n`);
    process.stdout.write(`outputs:\n${session.outputMetadata.map((m) => `  ${describe(m)}`).join('\n')}\n`);
    return;
  }

  const meta = Object.fromEntries(session.inputMetadata.map((m) => [m.name, m]));
  const feeds = {};
  for (const [name, file] of a.inputs) {
    if (!meta[name]) die(`the model has no input '${name}'; its inputs: ${session.inputNames.join(', ')}`);
    if (feeds[name]) die(`input '${name}' given twice`);
    const t = readNpy(file);
    const want = meta[name];
    if (want.isTensor && want.type !== t.type) {
      die(`input '${name}' is ${want.type} in the model, ${file} holds ${t.type}`);
    }
    if (want.isTensor && want.shape.length && want.shape.length !== t.shape.length) {
      die(`input '${name}' has rank ${want.shape.length} [${want.shape}], ${file} has shape [${t.shape}]`);
    }
    feeds[name] = new ort.Tensor(t.type, t.data, t.shape);
  }
  const missing = session.inputNames.filter((n) => !feeds[n]);
  if (missing.length) die(`missing inputs: ${missing.map((n) => describe(meta[n])).join('; ')}`);
  const fetch = a.outputs ?? session.outputNames;
  for (const n of fetch) {
    if (!session.outputNames.includes(n)) die(`the model has no output '${n}'; its outputs: ${session.outputNames.join(', ')}`);
  }

  const run = async () => {
    try {
      return await session.run(feeds, fetch);
    } catch (e) {
      die(`onnxruntime failed to run ${a.model}: ${e.message}`);
    }
  };
  let results;
  const times = [];
  if (a.time) {
    for (let i = 0; i < a.warmup; i++) results = await run();
    for (let i = 0; i < a.time; i++) {
      const s = process.hrtime.bigint();
      results = await run();
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
  } else {
    results = await run();
  }

  const written = {};
  if (a.outDir) {
    mkdirSync(a.outDir, { recursive: true });
    for (const n of fetch) {
      const t = results[n];
      const path = join(a.outDir, fileName(n));
      writeNpy(path, { type: t.type, shape: t.dims, data: t.data });
      written[n] = path;
    }
  }
  const shapes = Object.fromEntries(fetch.map((n) => [n, { type: results[n].type, shape: results[n].dims }]));
  const report = {
    model: a.model, onnxruntime: ort.env.versions?.node ?? 'unknown', opt: a.opt, threads: a.threads,
    load_ms: loadMs, outputs: shapes, written,
  };
  if (a.time) {
    Object.assign(report, {
      runs: a.time, warmup: a.warmup, best_ms: Math.min(...times), median_ms: median(times),
      mean_ms: times.reduce((p, q) => p + q, 0) / times.length,
    });
  }
  if (a.json) {
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    for (const n of fetch) {
      process.stdout.write(`${n}: ${shapes[n].type} [${shapes[n].shape.join(', ')}]${written[n] ? ` -> ${written[n]}` : ''}\n`);
    }
    if (a.time) {
      process.stdout.write(`onnxruntime ${report.onnxruntime} opt=${a.opt} threads=${a.threads}: ` +
        `best ${report.best_ms.toFixed(3)} ms, median ${report.median_ms.toFixed(3)} ms ` +
        `(${a.time} runs after ${a.warmup} warm-up)\n`);
    }
  }
}

main().catch((e) => die(e.stack ?? String(e)));
