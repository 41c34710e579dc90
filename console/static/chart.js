// Pictures for the console, drawn as SVG by this script: nothing loaded
// from elsewhere, nothing written as markup (every label is textContent),
// no style attribute (the policy refuses them; colours are classes in
// console.css).
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const HOUR_MS = 60 * 60 * 1000;
const MIN_SPAN_MS = 30 * 1000;

// OUTCOMES are the attempt log's outcomes (contract §7), in the legend's
// order.
export const OUTCOMES = ['2xx', '3xx', '4xx', '5xx', 'transport', 'timeout', 'refused'];

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    e.setAttribute(k, String(v));
  }
  if (text !== undefined) {
    e.textContent = String(text);
  }
  return e;
}

// outcomeClass is the class that colours an outcome; an outcome this
// script does not know is drawn as "other" rather than not at all.
function outcomeClass(outcome) {
  return 'outcome-' + (OUTCOMES.includes(outcome) ? outcome : 'other');
}

// attemptKey names one attempt among pages read at different times: a
// later POST of the same message has a higher attempt number.
export function attemptKey(a) {
  return a.seq + '/' + a.index + '/' + a.attempt + '/' + a.at + '/' + a.trigger;
}

// delays follows, attempt by attempt in time order, the messages the
// registration has POSTed without a 2xx yet. Its answer is the steps of
// the delay: from each step's time on, the oldest such message has waited
// since oldest (null: none is waiting). A resend changes nothing of the
// registration (contract §7), so it starts and ends no wait.
export function delays(attempts) {
  const sorted = attempts.filter((a) => a.trigger !== 'resend')
    .map((a) => ({ a, t: Date.parse(a.at) }))
    .filter((x) => !Number.isNaN(x.t))
    .sort((x, y) => x.t - y.t);
  const waiting = new Map();
  const steps = [];
  for (const { a, t } of sorted) {
    const key = a.seq + '/' + a.index;
    if (a.outcome === '2xx') {
      waiting.delete(key);
    } else if (!waiting.has(key)) {
      waiting.set(key, t);
    }
    const oldest = waiting.size ? Math.min(...waiting.values()) : null;
    steps.push({ t, oldest });
  }
  return steps;
}

// window is the span drawn: the last hour, narrowed to begin shortly
// before the first attempt in it (at least a minute wide), so a short
// history is not a single blob at the right edge.
function timeWindow(points, now) {
  const hourAgo = now - HOUR_MS;
  const inHour = points.filter((t) => t >= hourAgo);
  if (inHour.length === 0) {
    return { from: hourAgo, to: now };
  }
  const first = Math.min(...inHour);
  const span = Math.min(HOUR_MS, Math.max(MIN_SPAN_MS, (now - first) * 1.1));
  return { from: now - span, to: now };
}

function clock(t, withSeconds) {
  const d = new Date(t);
  const pad = (n) => String(n).padStart(2, '0');
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + (withSeconds ? ':' + pad(d.getSeconds()) : '');
}

function seconds(s) {
  if (s < 60) {
    return (Math.round(s * 10) / 10) + ' s';
  }
  if (s < 3600) {
    return (Math.round(s / 6) / 10) + ' min';
  }
  return (Math.round(s / 360) / 10) + ' h';
}

// niceStep is a tick interval of about span/count milliseconds that a
// clock reads well.
function niceStep(span, count) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].map((s) => s * 1000);
  return steps.find((s) => span / s <= count) || steps[steps.length - 1];
}

// drawHistory replaces the children of the <svg> target with the attempts
// of the last hour as points coloured by outcome (a lane for delivered, a
// lane for failed) and, below them, the delay over the same span. Every
// point carries its outcome, sequence and time as data- attributes.
export function drawHistory(target, attempts, now) {
  const W = 960;
  const H = 250;
  const left = 74;
  const right = 12;
  const lanes = { delivered: 28, failed: 62 };
  const delayTop = 96;
  const delayBottom = 210;
  const timed = attempts.map((a) => ({ a, t: Date.parse(a.at) })).filter((x) => !Number.isNaN(x.t));
  const end = Math.max(now, ...timed.map((x) => x.t));
  const win = timeWindow(timed.map((x) => x.t), end);
  const x = (t) => left + ((t - win.from) / (win.to - win.from)) * (W - left - right);

  target.replaceChildren();
  target.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  target.setAttribute('data-from', new Date(win.from).toISOString());
  target.setAttribute('data-to', new Date(win.to).toISOString());

  // Axes and lanes.
  const axis = svg('g', { class: 'axis' });
  axis.append(
    svg('text', { x: left - 8, y: lanes.delivered + 4, 'text-anchor': 'end' }, 'delivered'),
    svg('text', { x: left - 8, y: lanes.failed + 4, 'text-anchor': 'end' }, 'failed'),
    svg('line', { x1: left, x2: W - right, y1: lanes.delivered, y2: lanes.delivered, class: 'lane' }),
    svg('line', { x1: left, x2: W - right, y1: lanes.failed, y2: lanes.failed, class: 'lane' }),
    svg('line', { x1: left, x2: W - right, y1: delayBottom, y2: delayBottom, class: 'baseline' }),
  );
  const span = win.to - win.from;
  const step = niceStep(span, 8);
  // A label near either end is aligned to it, so none is cut off or
  // runs into the delay's scale.
  const anchorAt = (px) => {
    if (px < left + 30) {
      return 'start';
    }
    return px > W - right - 30 ? 'end' : 'middle';
  };
  for (let t = Math.ceil(win.from / step) * step; t <= win.to; t += step) {
    axis.append(
      svg('line', { x1: x(t), x2: x(t), y1: 12, y2: delayBottom, class: 'tick' }),
      svg('text', { x: x(t), y: delayBottom + 18, 'text-anchor': anchorAt(x(t)) }, clock(t, step < 60000)),
    );
  }
  target.append(axis);

  // The delay: a rising line while a message waits, a drop when it is
  // acknowledged.
  const steps = delays(attempts);
  let max = 0;
  const samples = [];
  const at = (t, oldest) => samples.push({ t, v: oldest === null ? 0 : Math.max(0, t - oldest) / 1000 });
  let oldest = null;
  let before = steps.filter((s) => s.t < win.from).pop();
  if (before) {
    oldest = before.oldest;
  }
  at(win.from, oldest);
  for (const s of steps.filter((s) => s.t >= win.from)) {
    at(s.t, oldest);
    oldest = s.oldest;
    at(s.t, oldest);
  }
  at(win.to, oldest);
  for (const s of samples) {
    max = Math.max(max, s.v);
  }
  const top = max > 0 ? max : 1;
  const y = (v) => delayBottom - (v / top) * (delayBottom - delayTop);
  const d = samples.map((s, i) => (i ? 'L' : 'M') + x(s.t).toFixed(1) + ' ' + y(s.v).toFixed(1)).join(' ');
  const delay = svg('g', { class: 'delay', 'data-max-seconds': max.toFixed(3),
    'data-last-seconds': samples[samples.length - 1].v.toFixed(3) });
  delay.append(
    svg('text', { x: left - 8, y: delayTop + 4, 'text-anchor': 'end' }, seconds(top)),
    svg('text', { x: left - 8, y: delayBottom + 4, 'text-anchor': 'end' }, '0 s'),
    svg('text', { x: left - 8, y: (delayTop + delayBottom) / 2 + 4, 'text-anchor': 'end' }, 'delay'),
    svg('line', { x1: left, x2: W - right, y1: delayTop, y2: delayTop, class: 'tick' }),
    svg('path', { d: d + ' L' + x(win.to).toFixed(1) + ' ' + delayBottom + ' L' + x(win.from).toFixed(1) + ' ' + delayBottom + ' Z', class: 'delay-area' }),
    svg('path', { d, class: 'delay-line' }),
  );
  target.append(delay);

  // The attempts, oldest first so the newest is drawn on top.
  const points = svg('g', { class: 'points' });
  for (const { a, t } of timed.filter((p) => p.t >= win.from).sort((p, q) => p.t - q.t)) {
    const c = svg('circle', {
      cx: x(t).toFixed(1),
      cy: a.outcome === '2xx' ? lanes.delivered : lanes.failed,
      r: 5,
      class: 'point ' + outcomeClass(a.outcome),
      'data-outcome': a.outcome,
      'data-seq': a.seq,
      'data-at': a.at,
    });
    c.append(svg('title', {}, clock(t, true) + ' · seq ' + a.seq + ' · attempt ' + a.attempt + ' · ' + a.trigger +
      ' · ' + a.outcome + (a.status ? ' ' + a.status : '')));
    points.append(c);
  }
  target.append(points);
  return { from: win.from, to: win.to, maxDelaySeconds: max };
}

// LAG_FULL and FAILURES_FULL are where a glance bar is full: both bars
// grow with the logarithm of their value, so 1 and 1,000 differ at a
// glance and a backlog of millions still fits.
const LAG_FULL = 1e6;
const FAILURES_FULL = 100;

// glanceBar is a small bar for a list cell: its width grows with the
// logarithm of value up to full; it carries the value as data-value.
function glanceBar(kind, value, full) {
  const W = 60;
  const v = Math.max(0, Number(value) || 0);
  const w = v === 0 ? 0 : Math.max(2, Math.min(1, Math.log10(v + 1) / Math.log10(full + 1)) * W);
  const bar = svg('svg', { class: 'glance glance-' + kind, viewBox: '0 0 ' + W + ' 8', width: W, height: 8,
    'data-value': v, role: 'img', 'aria-label': kind + ' ' + v });
  bar.append(svg('rect', { x: 0, y: 0, width: W, height: 8, rx: 2, class: 'glance-track' }),
    svg('rect', { x: 0, y: 0, width: w.toFixed(1), height: 8, rx: 2, class: 'glance-fill' }));
  return bar;
}

// lagBar and failuresBar are the list's glance of a registration: how
// far behind the stream it is and how many attempts in a row failed.
export const lagBar = (v) => glanceBar('lag', v, LAG_FULL);
export const failuresBar = (v) => glanceBar('failures', v, FAILURES_FULL);
