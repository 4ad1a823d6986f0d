// Mastra's own runEvals (@mastra/core) on crafted datasets, for tests/test_adversarial_60.py to compare with
// `evalcli run --json` on the same data.
//
//   node runevals_parity.mjs SPECS.json      prints one RunEvalsResult per spec (a JSON list), or {"rejected": message}
//
// SPECS is a list of {concurrency?, gates?: [S], scorers?: [S | {scorer: S, threshold}], data: [{input, ground_truth?} |
// {inputs, ground_truth?} | {turns: [{input, gates?, scorers?}], ground_truth?}]}. A scorer S is {id, values?: {KEY: V},
// default?: V, by?}, a code scorer made with createScorer (no LLM): KEY is the scored output's assistant texts joined
// with "|" (by: "input": the scored input when it is a string; by: "groundTruth": the ground truth as JSON), V a number,
// "ns" (notScorable()), "throw" or "nan". The agent is a real Agent over the AI SDK's MockLanguageModelV3 answering
// "R:" + the last user message, offline (run with MASTRA_TELEMETRY_DISABLED=1).
import { readFileSync } from "node:fs";
import { Agent } from "@mastra/core/agent";
import { createScorer, notScorable, runEvals } from "@mastra/core/evals";
import { MockLanguageModelV3 } from "ai/test";

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === "text").map((p) => p.text).join("");
  if (content && typeof content.content === "string" && content.content) return content.content;
  if (content && Array.isArray(content.parts)) return content.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
  return "";
}

/** The assistant texts of a scored output, joined with "|". */
function keyOf(output) {
  const messages = Array.isArray(output) ? output : [];
  return messages.filter((m) => m.role === "assistant").map((m) => textOf(m.content)).filter(Boolean).join("|");
}

function scorer(s) {
  return createScorer({ id: s.id, description: `parity scorer ${s.id}` }).generateScore(({ run }) => {
    const key = s.by === "input" ? (typeof run.input === "string" ? run.input : "<not a string>")
      : s.by === "groundTruth" ? JSON.stringify(run.groundTruth ?? null) : keyOf(run.output);
    const values = s.values ?? {};
    const value = key in values ? values[key] : s.default;
    if (value === undefined) throw new Error(`scorer ${s.id} has no value for ${JSON.stringify(key)}`);
    if (value === "ns") return notScorable(`not scorable on ${key}`);
    if (value === "throw") throw new Error(`scorer ${s.id} threw on ${key}`);
    if (value === "nan") return NaN;
    return value;
  });
}

function entry(e) {
  return e && typeof e === "object" && "scorer" in e ? { scorer: scorer(e.scorer), threshold: e.threshold } : scorer(e);
}

function item(raw) {
  const { ground_truth: groundTruth, turns, ...rest } = raw;
  return {
    ...rest,
    ...(groundTruth === undefined ? {} : { groundTruth }),
    ...(turns ? { turns: turns.map((t) => ({ input: t.input, ...(t.gates ? { gates: t.gates.map(scorer) } : {}),
                                             ...(t.scorers ? { scorers: t.scorers.map(entry) } : {}) })) } : {}),
  };
}

const model = new MockLanguageModelV3({
  provider: "evalcli-tests",
  modelId: "parity-echo",
  doGenerate: async ({ prompt }) => {
    const users = prompt.filter((m) => m.role === "user");
    return {
      content: [{ type: "text", text: `R:${textOf(users[users.length - 1]?.content ?? "")}` }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
               outputTokens: { total: 1, text: 1, reasoning: 0 } },
      warnings: [],
    };
  },
});
const agent = new Agent({ id: "parityAgent", name: "Parity Agent", instructions: "Echo.", model });

const results = [];
for (const spec of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  try {
    results.push(await runEvals({
      data: spec.data.map(item), target: agent, scorers: (spec.scorers ?? []).map(entry),
      ...(spec.gates ? { gates: spec.gates.map(scorer) } : {}), concurrency: spec.concurrency ?? 1,
    }));
  } catch (error) {
    results.push({ rejected: String(error?.message ?? error) });
  }
}
process.stdout.write(JSON.stringify(results));
