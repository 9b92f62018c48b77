// The self-contained HTML page of `tpusim teach` (see teach.h): the recording(s) as JSON
// and a small script that draws each array at any cycle as a textbook figure: the skewed
// operands still waiting to enter (a staircase on the left, and on top for
// output-stationary), the PEs with the active wavefront highlighted, C filling in as
// results leave, and a legend. With both dataflows the two arrays stand side by side on
// one time axis. No external scripts, fonts or styles.
#include <nlohmann/json.hpp>

#include "host/teach/teach.h"

namespace tpu::teach {
namespace {

constexpr const char* kHead = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tpusim teach: systolic matrix multiply, cycle by cycle</title>
<style>
body { font-family: ui-monospace, Menlo, Consolas, monospace; margin: 1.2em; color: #222; font-size: 13px; }
h1 { font-size: 1.25em; margin: 0 0 0.4em 0; }
h2 { font-size: 1.05em; margin: 0.2em 0; }
#controls button { font: inherit; padding: 0.2em 0.7em; }
#controls { margin: 0.6em 0; position: sticky; top: 0; background: #fff; padding: 0.3em 0; z-index: 1; }
#panels { display: flex; gap: 2.5em; flex-wrap: wrap; align-items: flex-start; }
.panel { border-top: 3px solid #246; padding-top: 0.3em; }
.status { color: #333; margin: 0.2em 0 0.4em 0; min-height: 1.3em; }
table.grid { border-collapse: separate; border-spacing: 2px; }
table.grid td { padding: 0.15em 0.35em; vertical-align: middle; white-space: pre; text-align: right; }
td.pe { border: 1px solid #889; background: #fafafa; min-width: 6.5em; vertical-align: top; text-align: left; }
td.pe.active { background: #ffe9a8; border-color: #c80; box-shadow: 0 0 0 1px #c80 inset; }
td.pe.switch { background: #ffd27a; }
td.pe .w { font-weight: bold; }
td.pe .s { color: #888; }
td.pe.loading .s { color: #b0b; font-weight: bold; }
td.pe .p.nz, td.pe .c.nz { color: #067; font-weight: bold; }
td.q { color: #2a6; min-width: 2.2em; border: 1px dashed #cdd; }
td.q.empty { border-color: transparent; }
td.q.next { background: #e3f6e9; font-weight: bold; }
td.qb { color: #a3a; }
td.qb.next { background: #f6e3f6; }
td.edge { color: #777; }
td.lab { color: #999; font-size: 0.85em; }
td.out { color: #067; font-weight: bold; }
table.cmat { border-collapse: collapse; margin-top: 0.4em; }
table.cmat td { border: 1px solid #ccd; min-width: 3.5em; text-align: right; padding: 0.1em 0.3em; color: #bbb; }
table.cmat td.part { color: #579; font-style: italic; background: #eef4fa; }
table.cmat td.fin { color: #035; font-weight: bold; background: #d5ecf9; }
table.cmat td.new { outline: 2px solid #06a; }
.legend { color: #444; max-width: 70em; line-height: 1.45; }
.sw { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; border: 1px solid #999; }
.totals { color: #444; margin-top: 0.4em; max-width: 36em; }
</style>
</head>
<body>
<h1 id="title">tpusim teach</h1>
<p class="legend" id="legend"></p>
<div id="controls">
<button id="first" title="first cycle">|&lt;</button>
<button id="prev" title="previous cycle">&lt; step</button>
<button id="play">play</button>
<button id="next" title="next cycle">step &gt;</button>
<button id="last" title="last cycle">&gt;|</button>
speed <select id="speed">
<option value="2000">0.5 cycle/s</option>
<option value="1000" selected>1 cycle/s</option>
<option value="400">2.5 cycles/s</option>
<option value="150">7 cycles/s</option>
</select>
<input type="range" id="slider" min="0" value="0">
<span id="cycle-label"></span>
</div>
<div id="panels"></div>
<details><summary>A, B and C</summary><pre id="mats"></pre></details>
<script type="application/json" id="data">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
"use strict";
const RUNS = JSON.parse(document.getElementById("data").textContent);
const $ = (id) => document.getElementById(id);
const T = Math.max(...RUNS.map((r) => r.frames.length));
let cur = 0, timer = null;
const esc = (v) => String(v);

function fmtMat(name, m) {
  return name + "\n" + m.map((r) => r.map((v) => String(v).padStart(7)).join("")).join("\n") + "\n\n";
}
const NAMES = { ws: "weight-stationary", os: "output-stationary" };

// One array's figure. p: id prefix ("" for WS, "os-" for OS).
function Panel(R) {
  this.N = R.dim;
  this.ws = R.dataflow === "ws";
  this.p = this.ws ? "" : "os-";
  this.W = Math.min(this.N + 2, 10);  // operands shown waiting, per lane
  this.R = R;
  this.F = R.frames;
  const el = document.createElement("div");
  el.className = "panel";
  el.innerHTML = this.html();
  $("panels").appendChild(el);
}

// The figure's cells: the queues and edges around the array, its PEs, C and the totals.
Panel.prototype.html = function () {
  const R = this.R, N = this.N, W = this.W, ws = this.ws, p = this.p;
  let h = "<h2>" + NAMES[R.dataflow] + ": " + R.cycles + " cycles (formula " + R.formula_cycles +
      "), utilization " + R.utilization.toFixed(1) + " %</h2><div class='status' id='" + p +
      "status'></div><table class='grid'>";
  // Output-stationary: B waits above its column, nearest value at the bottom.
  if (!ws) {
    for (let d = W - 1; d >= 0; d--) {
      h += "<tr><td colspan='" + (W + 1) + "' class='lab'>" + (d === W - 1 ? "B waiting" : "") + "</td>";
      for (let c = 0; c < N; c++) h += "<td class='q qb' id='" + p + "qb-" + d + "-" + c + "'></td>";
      h += "</tr>";
    }
  }
  h += "<tr><td colspan='" + (W + 1) + "' class='lab'>" + (ws ? "A waiting, skewed" : "A waiting, skewed") + "</td>";
  for (let c = 0; c < N; c++) h += "<td class='edge' id='" + p + "wr-" + c + "'></td>";
  h += "</tr>";
  for (let r = 0; r < N; r++) {
    h += "<tr>";
    for (let d = W - 1; d >= 0; d--) h += "<td class='q' id='" + p + "qa-" + r + "-" + d + "'></td>";
    h += "<td class='edge' id='" + p + "in-" + r + "'></td>";
    for (let c = 0; c < N; c++) h += "<td class='pe' id='" + p + "pe-" + r + "-" + c + "'></td>";
    h += "</tr>";
  }
  h += "<tr><td colspan='" + (W + 1) + "' class='lab'>" + (ws ? "partial sums leave" : "C rows drain out") + "</td>";
  for (let c = 0; c < N; c++) h += "<td class='edge out' id='" + p + "bot-" + c + "'></td>";
  h += "</tr></table><div class='lab'>C = A x B, filling in as results leave the array</div><table class='cmat'>";
  for (let i = 0; i < R.m; i++) {
    h += "<tr>";
    for (let j = 0; j < R.n; j++) h += "<td id='" + p + "c-" + i + "-" + j + "'></td>";
    h += "</tr>";
  }
  return h + "</table><div class='totals'>whole run, counted from the RTL: " + R.macs + " useful MACs; " +
      R.moved.reads_in + " values read in; " + R.moved.operand_writes +
      " operand register writes; " + R.moved.sum_writes + " partial-sum writes; " +
      R.moved.passes + " values passed between PEs; " + R.moved.writes_out +
      " results written out</div>";
};

// Is lane l's value entering at frame t a real operand? OS: the RTL's valid bit; WS: the
// row that fired at t - l (lane l is skewed by l cycles; the WS PE has no valid bit).
Panel.prototype.laneValid = function (t, l) {
  const F = this.F;
  return this.ws ? (t - l >= 0 && t < F.length && F[t - l].fire === 1)
                 : (t < F.length && F[t].in_valid[l] === 1);
};

// Frame t (past the last: the finished run).
Panel.prototype.show = function (t) {
  const F = this.F, N = this.N, ws = this.ws;
  const done = t >= F.length;
  const f = F[Math.min(t, F.length - 1)];
  $(this.p + "status").textContent = (done ? "finished at cycle " + F.length + ": " : "") +
      (ws ? "rows in " + f.rows_in + "   tiles " + f.tiles + "   MACs issued " + f.rows_in * N * N +
            "   result rows out " + f.results_out
          : "beats in " + f.beats_in + "   MACs done " + f.macs + "   result rows out " + f.results_out);
  this.showLanes(t, f, done);
  this.showPes(f);
  this.showC(t, f, done);
};

// The operands waiting at each lane, and the array's edges.
Panel.prototype.showLanes = function (t, f, done) {
  const F = this.F, N = this.N, W = this.W, ws = this.ws, p = this.p;
  for (let r = 0; r < N; r++) {
    for (let d = 0; d < W; d++) {
      const q = $(p + "qa-" + r + "-" + d), tt = t + d, ok = !done && this.laneValid(tt, r);
      q.textContent = ok ? esc(ws ? F[tt].act_in[r] : F[tt].a_in[r]) : "";
      q.className = "q" + (ok ? (d === 0 ? " next" : "") : " empty");
    }
    if (!ws) {
      for (let d = 0; d < W; d++) {
        const q = $(p + "qb-" + d + "-" + r), tt = t + d, ok = !done && this.laneValid(tt, r);
        q.textContent = ok ? esc(F[tt].b_in[r]) : "";
        q.className = "q qb" + (ok ? (d === 0 ? " next" : "") : " empty");
      }
    }
    const e = $(p + "in-" + r);
    e.textContent = ws ? "k" + r + (f.switch_in[r] ? "*" : " ") + ">" : "r" + r + " >";
  }
  for (let c = 0; c < N; c++) {
    if (ws) {
      const w = f.w_write[c];
      $(p + "wr-" + c).textContent = w ? "v w" + w[0] + ":" + w[1] : "col " + c;
      $(p + "bot-" + c).textContent = "v " + f.pe[(N - 1) * N + c][3];
    } else {
      $(p + "wr-" + c).textContent = "col " + c + " v";
      $(p + "bot-" + c).textContent = f.out ? "v " + f.out[c] : "";
    }
  }
};

// Each PE's registers, and whether it works this cycle.
Panel.prototype.showPes = function (f) {
  const N = this.N, ws = this.ws, p = this.p;
  for (let r = 0; r < N; r++) {
    for (let c = 0; c < N; c++) {
      const v = f.pe[r * N + c], cell = $(p + "pe-" + r + "-" + c);
      if (ws) {
        cell.innerHTML = "<span class='w'>w " + v[0] + "</span> <span class='s'>s " + v[1] +
            "</span>\n<span class='a'>a " + v[2] + (v[4] ? "*" : "") + "</span>\n<span class='p" +
            (v[3] !== 0 ? " nz" : "") + "'>p " + v[3] + "</span>";
        const w = f.w_write[c];
        cell.className = "pe" + (v[4] ? " switch" : v[5] ? " active" : "") +
            (w && w[0] === r ? " loading" : "");
      } else {
        cell.innerHTML = "<span class='a'>a " + v[0] + "</span> <span class='b'>b " + v[1] +
            "</span>\n<span class='c" + (v[2] !== 0 ? " nz" : "") + "'>c " + v[2] + "</span>";
        cell.className = "pe" + (v[3] ? " active" : "");
      }
    }
  }
};

// C as far as results have left the array; the ones that changed this cycle marked.
Panel.prototype.showC = function (t, f, done) {
  const F = this.F, R = this.R, p = this.p;
  const prev = t > 0 ? F[Math.min(t - 1, F.length - 1)].c : null;
  for (let i = 0; i < R.m; i++) {
    for (let j = 0; j < R.n; j++) {
      const x = f.c[i * R.n + j], cell = $(p + "c-" + i + "-" + j);
      cell.textContent = x ? x[0] : ".";
      const changed = x && (!prev || !prev[i * R.n + j] || prev[i * R.n + j][0] !== x[0] ||
                            prev[i * R.n + j][1] !== x[1]);
      cell.className = (x ? (x[1] ? "fin" : "part") : "") + (changed && !done ? " new" : "");
    }
  }
};

const panels = RUNS.map((r) => new Panel(r));
function show(i) {
  cur = Math.max(0, Math.min(T - 1, i));
  $("cycle-label").textContent = "cycle " + (cur + 1) + " of " + T;
  $("slider").value = cur;
  panels.forEach((p) => p.show(cur));
}
function stop() { if (timer) { clearInterval(timer); timer = null; } $("play").textContent = "play"; }
function play() {
  if (timer) { stop(); return; }
  if (cur === T - 1) show(0);
  $("play").textContent = "pause";
  timer = setInterval(() => { if (cur >= T - 1) stop(); else show(cur + 1); }, Number($("speed").value));
}
const R0 = RUNS[0];
$("title").textContent = "tpusim teach: C = A x B, A " + R0.m + " x " + R0.k + ", B " + R0.k +
    " x " + R0.n + ", on " + (RUNS.length > 1 ? "two " : "a ") + R0.dim + " x " + R0.dim + " " +
    RUNS.map((r) => NAMES[r.dataflow]).join(" and ") + (RUNS.length > 1 ? " arrays" : " array") +
    " (the RTL, cycle by cycle)";
$("legend").innerHTML =
    "<span class='sw' style='background:#ffe9a8'></span> the wavefront: PEs holding real operands this cycle" +
    (RUNS.some((r) => r.dataflow === "ws") ? " (<span class='sw' style='background:#ffd27a'></span> with the weight-switch bit *)" : "") +
    ". <span class='sw' style='background:#e3f6e9'></span> A values waiting to enter, one lane per row, each lane one cycle behind the one above (the skew); the rightmost enters at this edge." +
    (RUNS.some((r) => r.dataflow === "os") ? " <span class='sw' style='background:#f6e3f6'></span> B values waiting above their columns (output-stationary)." : "") +
    " Weight-stationary PEs: <b>w</b> the weight held still, <span style='color:#b0b'>s</span> the next tile's weight loading behind it, a the activation moving right, <b>p</b> the partial sum moving down." +
    " Output-stationary PEs: a moving right, b moving down, <b>c</b> the element of C that stays. " +
    "C: <span class='sw' style='background:#eef4fa'></span> partial, <span class='sw' style='background:#d5ecf9'></span> final, outlined when it changed this cycle. Values are those during the cycle, before its clock edge.";
$("mats").textContent = fmtMat("A", R0.a) + fmtMat("B", R0.b) + fmtMat("C = A x B (RTL" +
    (RUNS.every((r) => r.bit_exact) ? ", bit-exact with Eigen)" : ", DIFFERS from Eigen)"), R0.c);
$("slider").max = T - 1;
$("first").onclick = () => { stop(); show(0); };
$("prev").onclick = () => { stop(); show(cur - 1); };
$("next").onclick = () => { stop(); show(cur + 1); };
$("last").onclick = () => { stop(); show(T - 1); };
$("play").onclick = play;
$("speed").onchange = () => { if (timer) { stop(); play(); } };
$("slider").oninput = () => { stop(); show(Number($("slider").value)); };
document.addEventListener("keydown", (e) => {
  if (e.key === "ArrowRight") $("next").click();
  if (e.key === "ArrowLeft") $("prev").click();
  if (e.key === " ") { e.preventDefault(); play(); }
});
// #cycle=K (1-based) opens at cycle K; &step=S then presses "step >" S times.
const q = new URLSearchParams(location.hash.slice(1));
show(q.has("cycle") ? Number(q.get("cycle")) - 1 : 0);
for (let s = 0; s < Number(q.get("step") || 0); s++) $("next").click();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string TeachHtml(const std::vector<const Recording*>& runs) {
  nlohmann::json data_json = nlohmann::json::array();
  for (const Recording* run : runs) data_json.push_back(TeachJson(*run));
  std::string data = data_json.dump();
  // Keep the data from closing its script element early.
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) {
    data.replace(at, 2, "<\\/");
  }
  return std::string(kHead) + data + kTail;
}

}  // namespace tpu::teach
