// Charts drawn from the log with uPlot (vendored: uPlot.esm.js, its licence in uPlot.LICENSE.txt):
// the project's quota usage over time (states as_of sampled positions, each drawn at its event's
// time, its position in the legend), the whole cloud's capacity and what is used of it (admins),
// and servers booted per minute, counted from the event stream's replay of the last WINDOW
// positions and then live.

import uPlot from "./uPlot.esm.js";
import { isAdmin, session } from "./api.js";
import { h } from "./dom.js";
import { EventStream } from "./events.js";
import { capacityAt, headPosition, hostNames, projectUsageAt, timedSamples } from "./past.js";
import { frame } from "./tables.js";

const POINTS = 24; // positions sampled over the last WINDOW positions
const WINDOW = 20_000; // positions replayed for the samples' times, and for boots per minute
const BOOTED = "stratus.instance.spawned";
const HEIGHT = 220;
// Tick steps for counts: whole numbers only.
const WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7];

function width(el) {
  return Math.max(320, (el.clientWidth || 900) - 20);
}

const timeOfDay = uPlot.fmtDate("{HH}:{mm}:{ss}");
const dayAndTime = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}");
const fullTime = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}");

// A line chart over time: ``points`` are the sampled [{position, time}], ``series`` is
// [[label, color, values]]. The x axis is the events' times; the legend names each point's time and
// log position. The axis' labels are kept in ``data-x-labels`` (the canvas has no text to read).
function timeChart(box, title, points, series) {
  box.replaceChildren();
  box.dataset.points = String(points.length);
  const positions = points.map((p) => p.position);
  const xs = points.map((p) => p.time);
  const oneDay = xs.length < 2 || xs[xs.length - 1] - xs[0] < 24 * 3600;
  const opts = {
    title,
    width: width(box),
    height: HEIGHT,
    axes: [
      {
        label: "time",
        space: oneDay ? 80 : 130, // px between ticks: room for a label
        values: (u, splits) => {
          const labels = splits.map((v) => (oneDay ? timeOfDay : dayAndTime)(new Date(v * 1000)));
          box.dataset.xLabels = JSON.stringify(labels);
          return labels;
        },
      },
      { incrs: WHOLE },
    ],
    series: [
      {
        label: "time",
        value: (u, v, si, idx) => (idx === null || idx === undefined || v === null
          ? "–"
          : `${fullTime(new Date(v * 1000))} · position ${positions[idx]}`),
      },
      ...series.map(([label, stroke]) => ({ label, stroke, width: 2 })),
    ],
  };
  return new uPlot(opts, [xs, ...series.map(([, , values]) => values)], box);
}

async function usageChart(box, points) {
  const project = session().project;
  const usages = await Promise.all(points.map((p) => projectUsageAt(project.id, p.position)));
  timeChart(box, `${project.name}: quota usage`, points, [
    ["servers", "#2f5bd3", usages.map((u) => u.instances)],
    ["vCPUs", "#18794e", usages.map((u) => u.cores)],
  ]);
}

async function capacityCharts(cpuBox, ramBox, points) {
  const names = await hostNames();
  const at = await Promise.all(points.map((p) => capacityAt(names, p.position)));
  timeChart(cpuBox, "Cloud vCPUs: capacity and used", points, [
    ["capacity", "#667085", at.map((c) => c.vcpus)],
    ["used", "#c0262d", at.map((c) => c.vcpus_used)],
  ]);
  timeChart(ramBox, "Cloud RAM (MB): capacity and used", points, [
    ["capacity", "#667085", at.map((c) => c.memory_mb)],
    ["used", "#b35c00", at.map((c) => c.memory_mb_used)],
  ]);
}

// Boots counted per minute (keys: the minute's start in seconds).
class Boots {
  constructor(box) {
    this.box = box;
    this.counts = new Map();
    this.total = 0;
    this.plot = null;
    this.pending = false;
  }

  add(event) {
    if (event.type !== BOOTED || !event.time) {
      return;
    }
    const minute = Math.floor(Date.parse(event.time) / 60_000) * 60;
    this.counts.set(minute, (this.counts.get(minute) || 0) + 1);
    this.total += 1;
    if (!this.pending) {
      this.pending = true;
      setTimeout(() => this.draw(), 250); // a replay of many events draws once
    }
  }

  data() {
    const now = Math.floor(Date.now() / 60_000) * 60;
    const first = this.counts.size ? Math.min(...this.counts.keys()) : now;
    // the last ten minutes at least (one bar alone would stretch over years), one day at most
    const start = Math.max(Math.min(first, now - 600), now - 24 * 3600);
    const xs = [];
    const ys = [];
    for (let m = start; m <= now; m += 60) {
      xs.push(m);
      ys.push(this.counts.get(m) || 0);
    }
    return [xs, ys];
  }

  draw() {
    this.pending = false;
    const data = this.data();
    this.box.dataset.boots = String(this.total);
    if (this.plot) {
      this.plot.setData(data);
      return;
    }
    this.box.replaceChildren();
    this.plot = new uPlot({
      title: "Servers booted per minute",
      width: width(this.box),
      height: HEIGHT,
      axes: [{}, { incrs: WHOLE }],
      series: [{}, { label: "boots", stroke: "#2f5bd3", fill: "rgba(47, 91, 211, 0.3)", paths: uPlot.paths.bars({ size: [0.8] }) }],
    }, data, this.box);
  }
}

export function chartsView(main, context) {
  const admin = isAdmin();
  const usageBox = h("div", { class: "chart", id: "usage-chart" }, "reading the log…");
  const bootsBox = h("div", { class: "chart", id: "boots-chart" }, "reading the log…");
  const cpuBox = h("div", { class: "chart", id: "vcpu-chart" });
  const ramBox = h("div", { class: "chart", id: "ram-chart" });
  const fail = frame(main, "Charts",
    h("p", { class: "muted" }, admin
      ? "Drawn from the log: states as they were at sampled positions, each at its event's time, and the boot events of the whole cloud."
      : "Drawn from the log: your project's usage as it was at sampled positions, each at its event's time, and its boot events."),
    usageBox, bootsBox, ...(admin ? [cpuBox, ramBox] : []));
  let stream = null;
  let left = false;
  (async () => {
    const head = await headPosition(context);
    const boots = new Boots(bootsBox);
    const where = await (await fetch("/dashboard/config.json")).json();
    if (!left) {
      const after = Math.max(0, head - WINDOW);
      stream = new EventStream(`${where.events_url}?type=server&after=${after}`, {
        onEvent: (event) => boots.add(event),
        onPosition: () => {},
      });
      stream.start();
      boots.draw();
    }
    const points = await timedSamples(where.events_url, head, POINTS, WINDOW);
    await Promise.all([usageChart(usageBox, points), admin ? capacityCharts(cpuBox, ramBox, points) : null]);
  })().catch(fail);
  return () => {
    left = true;
    if (stream) {
      stream.stop();
    }
  };
}
