// Mastra's runEvals on the same workload as evalcli's benchmark (bench/run.py starts this script).
//
//   node run.mjs --n 1000 --turns 3 --latency 0.05 --concurrency 64 --model sleep|http [--api-base URL]
//
// The agent's model answers every turn with one assistant text after `latency` seconds: either an
// in-process model that awaits a timer (like evalcli's sleep target), or the AI SDK's OpenAI chat
// model against bench/openai_server.py (like evalcli's http target through litellm). Even items are
// `inputs` conversations, odd items `turns` with a per-turn gate; the gate includes('Brooklyn') and
// the scorer excludes('error') are the same checks evalcli runs. Prints one JSON line of figures.
import { performance } from "node:perf_hooks";

const started = performance.now();
const { Agent } = await import("@mastra/core/agent");
const { runEvals } = await import("@mastra/core/evals");
const { includes, excludes } = await import("@mastra/evals/checks");
const importedMs = performance.now() - started;

function args() {
  const out = { n: 100, turns: 3, latency: 0.05, concurrency: 64, model: "sleep", apiBase: "" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "").replace(/-(\w)/g, (_, c) => c.toUpperCase());
    out[key] = key === "model" || key === "apiBase" ? argv[i + 1] : Number(argv[i + 1]);
  }
  return out;
}

const ANSWER = "It is 21°C and clear in Brooklyn.";

/** A LanguageModelV2 that waits `latency` seconds, then answers with one text (no network). */
function sleepModel(latency) {
  const usage = { inputTokens: 12, outputTokens: 9, totalTokens: 21 };
  const wait = () => new Promise((resolve) => setTimeout(resolve, latency * 1000));
  return {
    specificationVersion: "v2",
    provider: "bench",
    modelId: "sleep",
    supportedUrls: {},
    async doGenerate() {
      await wait();
      return { content: [{ type: "text", text: ANSWER }], finishReason: "stop", usage, warnings: [] };
    },
    async doStream() {
      await wait();
      const parts = [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: ANSWER },
        { type: "text-end", id: "t1" },
        { type: "finish", finishReason: "stop", usage },
      ];
      const stream = new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      });
      return { stream };
    },
  };
}

async function httpModel(apiBase) {
  const { createOpenAI } = await import("@ai-sdk/openai");
  return createOpenAI({ baseURL: apiBase, apiKey: "bench-not-a-key" }).chat("bench");
}

const opts = args();
const model = opts.model === "http" ? await httpModel(opts.apiBase) : sleepModel(opts.latency);
const agent = new Agent({ id: "bench-agent", name: "bench-agent", instructions: "Answer about the weather.", model });

const gate = includes("Brooklyn");
const data = [];
for (let i = 0; i < opts.n; i++) {
  const inputs = [];
  for (let t = 0; t < opts.turns; t++) inputs.push(`Conversation ${i}, turn ${t}: what is the weather in Brooklyn?`);
  data.push(i % 2 === 0 ? { inputs } : { turns: inputs.map((input) => ({ input, gates: [gate] })) });
}

const runStarted = performance.now();
const result = await runEvals({ data, target: agent, gates: [gate], scorers: [excludes("error")], concurrency: opts.concurrency });
const runMs = performance.now() - runStarted;
console.log(JSON.stringify({
  verdict: result.verdict ?? null,
  totalItems: result.summary?.totalItems,
  scores: result.scores,
  importSeconds: importedMs / 1000,
  runSeconds: runMs / 1000,
  peakRssMb: process.resourceUsage().maxRSS / 1024,
}));
