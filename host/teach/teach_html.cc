// The self-contained HTML player of `tpusim teach` (see teach.h): the recording as JSON and
// a small script that draws the array at any cycle. No external scripts, fonts or styles.
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
body { font-family: ui-monospace, Menlo, Consolas, monospace; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; }
#controls button { font: inherit; padding: 0.2em 0.7em; }
#controls { margin: 0.8em 0; }
table.grid { border-collapse: collapse; margin: 0.5em 0; }
table.grid td { border: 1px solid #999; padding: 0.2em 0.5em; vertical-align: top; white-space: pre; }
table.grid td.edge { border: none; color: #777; }
td.pe .w { font-weight: bold; }
td.pe .s { color: #777; }
td.pe.loading .s { color: #b0b; font-weight: bold; }
td.pe.active { background: #e8f7e8; }
td.pe.switch { background: #fff3c4; }
td.pe .p.nz { color: #067; font-weight: bold; }
td.edge.hot { color: #080; font-weight: bold; }
#out { color: #067; min-height: 1.4em; }
.legend { color: #555; max-width: 60em; }
</style>
</head>
<body>
<h1 id="title">tpusim teach</h1>
<p class="legend">A weight-stationary systolic array running on the RTL. Each PE holds a weight
of B (<b>w</b>; <span style="color:#b0b">s</span> is the next tile's weight loading behind it),
multiplies the activation passing through it (<b>a</b>, moving right; * marks the weight-switch
bit travelling with the first row of a tile) and adds the partial sum from above (<b>p</b>,
moving down). Left: activations entering each row (skewed by one cycle per row). Top: weights
being written into the shadow registers. Bottom: partial sums leaving each column, and
finished result rows. Values are those during the cycle, before its clock edge.</p>
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
<div id="status"></div>
<table class="grid" id="grid"></table>
<div id="out"></div>
<details><summary>A, B and C</summary><pre id="mats"></pre></details>
<script type="application/json" id="data">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const N = D.dim;
let cur = 0, timer = null;
const $ = (id) => document.getElementById(id);
function fmtMat(name, m) {
  return name + "\n" + m.map((r) => r.map((v) => String(v).padStart(7)).join("")).join("\n") + "\n\n";
}
function build() {
  $("title").textContent = "tpusim teach: C = A x B, A " + D.m + " x " + D.k + ", B " + D.k +
      " x " + D.n + ", on a " + N + " x " + N + " array (" + D.cycles + " cycles, formula " +
      D.formula_cycles + ")";
  $("mats").textContent = fmtMat("A", D.a) + fmtMat("B", D.b) + fmtMat("C = A x B (RTL" +
      (D.bit_exact ? ", bit-exact with Eigen)" : ", DIFFERS from Eigen)"), D.c);
  const g = $("grid");
  let html = "<tr><td class='edge'></td>";
  for (let c = 0; c < N; c++) html += "<td class='edge' id='wr-" + c + "'></td>";
  html += "</tr>";
  for (let r = 0; r < N; r++) {
    html += "<tr><td class='edge' id='in-" + r + "'></td>";
    for (let c = 0; c < N; c++) html += "<td class='pe' id='pe-" + r + "-" + c + "'></td>";
    html += "</tr>";
  }
  html += "<tr><td class='edge'></td>";
  for (let c = 0; c < N; c++) html += "<td class='edge' id='bot-" + c + "'></td>";
  g.innerHTML = html + "</tr>";
  $("slider").max = D.frames.length - 1;
}
function show(i) {
  cur = Math.max(0, Math.min(D.frames.length - 1, i));
  const f = D.frames[cur];
  $("cycle-label").textContent = "cycle " + f.cycle + " of " + D.frames.length;
  $("slider").value = cur;
  $("status").textContent = "rows in " + f.rows_in + "   tiles " + f.tiles + "   MACs issued " +
      f.rows_in * N * N + "   result rows out " + f.results_out;
  for (let c = 0; c < N; c++) {
    const w = f.w_write[c];
    $("wr-" + c).textContent = w ? "v w" + w[0] + ":" + w[1] : "";
    $("bot-" + c).textContent = "v " + f.pe[(N - 1) * N + c][3];
  }
  for (let r = 0; r < N; r++) {
    const e = $("in-" + r);
    e.textContent = "k" + r + " " + f.act_in[r] + (f.switch_in[r] ? "*" : " ") + " >";
    e.className = "edge" + (f.act_in[r] !== 0 || f.switch_in[r] ? " hot" : "");
    for (let c = 0; c < N; c++) {
      const p = f.pe[r * N + c];
      const cell = $("pe-" + r + "-" + c);
      cell.innerHTML = "<span class='w'>w " + p[0] + "</span> <span class='s'>s " + p[1] +
          "</span>\n<span class='a'>a " + p[2] + (p[4] ? "*" : "") + "</span>\n<span class='p" +
          (p[3] !== 0 ? " nz" : "") + "'>p " + p[3] + "</span>";
      const w = f.w_write[c];
      cell.className = "pe" + (p[4] ? " switch" : p[2] !== 0 ? " active" : "") +
          (w && w[0] === r ? " loading" : "");
    }
  }
  $("out").textContent = f.out ? "result row out: " + f.out.join(" ") : "";
}
function stop() { if (timer) { clearInterval(timer); timer = null; } $("play").textContent = "play"; }
function play() {
  if (timer) { stop(); return; }
  if (cur === D.frames.length - 1) show(0);
  $("play").textContent = "pause";
  timer = setInterval(() => { if (cur >= D.frames.length - 1) stop(); else show(cur + 1); },
                      Number($("speed").value));
}
$("first").onclick = () => { stop(); show(0); };
$("prev").onclick = () => { stop(); show(cur - 1); };
$("next").onclick = () => { stop(); show(cur + 1); };
$("last").onclick = () => { stop(); show(D.frames.length - 1); };
$("play").onclick = play;
$("speed").onchange = () => { if (timer) { stop(); play(); } };
$("slider").oninput = () => { stop(); show(Number($("slider").value)); };
document.addEventListener("keydown", (e) => {
  if (e.key === "ArrowRight") $("next").click();
  if (e.key === "ArrowLeft") $("prev").click();
  if (e.key === " ") { e.preventDefault(); play(); }
});
build();
// #cycle=K (1-based) opens at cycle K; &step=S then presses "step >" S times.
const q = new URLSearchParams(location.hash.slice(1));
show(q.has("cycle") ? Number(q.get("cycle")) - 1 : 0);
for (let s = 0; s < Number(q.get("step") || 0); s++) $("next").click();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string TeachHtml(const TeachRun& run) {
  std::string data = TeachJson(run).dump();
  // Keep the data from closing its script element early.
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) {
    data.replace(at, 2, "<\\/");
  }
  return std::string(kHead) + data + kTail;
}

}  // namespace tpu::teach
