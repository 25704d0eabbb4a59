'use strict'
// Hand-written SVG line plots: log or linear axes, labelled ticks, one polyline per series with
// min–max whiskers at each point, and a legend. No plotting package.

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b']

function esc (s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

function fmtTick (v) {
  if (v >= 1e6) return (v / 1e6) + 'M'
  if (v >= 1e3) return (v / 1e3) + 'k'
  if (v >= 1) return String(Math.round(v * 100) / 100)
  return String(Number(v.toPrecision(2)))
}

/** An axis mapping values to pixels, with its tick values. */
function axis (values, log, from, to) {
  let lo = Math.min(...values)
  let hi = Math.max(...values)
  if (log) {
    lo = Math.pow(10, Math.floor(Math.log10(lo)))
    hi = Math.pow(10, Math.ceil(Math.log10(hi)))
    if (hi === lo) hi = lo * 10
    const ticks = []
    for (let v = lo; v <= hi * 1.0001; v *= 10) ticks.push(v)
    const span = Math.log10(hi) - Math.log10(lo)
    return { ticks, at: (v) => from + (to - from) * (Math.log10(v) - Math.log10(lo)) / span }
  }
  lo = Math.min(0, lo)
  if (hi === lo) hi = lo + 1
  const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / 4)))
  const nice = [1, 2, 5, 10].map(m => m * step).find(s => (hi - lo) / s <= 6)
  hi = Math.ceil(hi / nice) * nice
  const ticks = []
  for (let v = lo; v <= hi + nice / 1000; v += nice) ticks.push(v)
  return { ticks, at: (v) => from + (to - from) * (v - lo) / (hi - lo) }
}

/**
 * @param {{title: string, xLabel: string, yLabel: string, logX?: boolean, logY?: boolean,
 *   series: Array<{name: string, points: Array<{x: number, y: number, min?: number, max?: number}>}>}} plot
 * @returns {string} SVG text
 */
function linePlot (plot) {
  const W = 760; const H = 460
  const L = 90; const R = 230; const T = 50; const B = 70
  const pts = plot.series.flatMap(s => s.points).filter(p => Number.isFinite(p.y) && p.y > 0)
  if (pts.length === 0) return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="80"><text x="10" y="40">${esc(plot.title)}: no data</text></svg>\n`
  const xs = axis(pts.map(p => p.x), plot.logX, L, W - R)
  const ys = axis(pts.flatMap(p => [p.y, p.min ?? p.y, p.max ?? p.y]).filter(v => v > 0), plot.logY, H - B, T)
  const out = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`)
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`)
  out.push(`<text x="${(L + W - R) / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(plot.title)}</text>`)
  for (const t of xs.ticks) {
    const x = xs.at(t).toFixed(1)
    out.push(`<line x1="${x}" y1="${T}" x2="${x}" y2="${H - B}" stroke="#e5e5e5"/>`)
    out.push(`<text x="${x}" y="${H - B + 18}" text-anchor="middle">${fmtTick(t)}</text>`)
  }
  for (const t of ys.ticks) {
    const y = ys.at(t).toFixed(1)
    out.push(`<line x1="${L}" y1="${y}" x2="${W - R}" y2="${y}" stroke="#e5e5e5"/>`)
    out.push(`<text x="${L - 8}" y="${Number(y) + 4}" text-anchor="end">${fmtTick(t)}</text>`)
  }
  out.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/>`)
  out.push(`<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="black"/>`)
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 22}" text-anchor="middle">${esc(plot.xLabel)}</text>`)
  out.push(`<text transform="translate(22 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(plot.yLabel)}</text>`)
  plot.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]
    const p = s.points.filter(q => Number.isFinite(q.y) && q.y > 0)
    if (p.length > 1) out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${p.map(q => `${xs.at(q.x).toFixed(1)},${ys.at(q.y).toFixed(1)}`).join(' ')}"/>`)
    for (const q of p) {
      const x = xs.at(q.x).toFixed(1)
      if (q.min > 0 && q.max > 0) out.push(`<line x1="${x}" y1="${ys.at(q.min).toFixed(1)}" x2="${x}" y2="${ys.at(q.max).toFixed(1)}" stroke="${color}" stroke-width="1"/>`)
      out.push(`<circle cx="${x}" cy="${ys.at(q.y).toFixed(1)}" r="3.5" fill="${color}"/>`)
    }
    const ly = T + 10 + i * 22
    out.push(`<line x1="${W - R + 15}" y1="${ly}" x2="${W - R + 40}" y2="${ly}" stroke="${color}" stroke-width="2"/>`)
    out.push(`<text x="${W - R + 46}" y="${ly + 4}">${esc(s.name)}</text>`)
  })
  out.push(`<text x="${W - R + 15}" y="${T + 18 + plot.series.length * 22}" fill="#555">dots: median; bars: min–max</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}

module.exports = { linePlot }
