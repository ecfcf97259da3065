/* pt2chakra report: draws the lane timeline from the page's JSON, zooms and
   pans it, shows a tooltip per bar, and sorts the tables. No dependencies. */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var ROW = 14, PAD = 2, MIN_ZOOM = 1e-6;
  var D = JSON.parse(document.getElementById("timeline-data").textContent);
  var lanesEl = document.getElementById("lanes");
  var axis = document.getElementById("axis");
  var tip = document.getElementById("tip");
  var rangeEl = document.getElementById("range");
  var full0 = D.start_us, full1 = Math.max(D.end_us, D.start_us + 1);
  var view = [full0, full1];
  var drawn = [];  // {svg, rank, rows}: lanes drawn so far
  var hideMeasured = false;
  var pending = false;

  function fmt(us) {
    var a = Math.abs(us);
    if (a >= 1e6) return (+(us / 1e6).toPrecision(4)) + " s";
    if (a >= 1e3) return (+(us / 1e3).toPrecision(4)) + " ms";
    return (+us.toPrecision(4)) + " us";
  }

  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function categoryStyles() {
    var css = "";
    D.colors.forEach(function (c, k) { css += "svg.lanes rect.c" + k + "{fill:" + c + ";stroke:" + c + "}"; });
    css += "svg.lanes rect.b{stroke-width:.6px;vector-effect:non-scaling-stroke}";
    css += "svg.lanes rect.cp{vector-effect:non-scaling-stroke}";
    var el = document.createElement("style");
    el.textContent = css;
    document.head.appendChild(el);
  }

  function visibleRows(rank) {
    return rank.rows.filter(function (r) { return !(hideMeasured && r.measured); });
  }

  function drawRank(entry) {
    var rows = visibleRows(entry.rank);
    entry.rows = rows;
    var labels = [], parts = [];
    var h = rows.length * ROW, span = full1 - full0;
    rows.forEach(function (row, j) {
      var y = j * ROW, m = row.measured;
      labels.push('<div class="' + (m ? "m" : "") + '" title="' + esc(row.label) + (m ? " (measured)" : " (simulated)") + '">' +
                  (m ? "measured" : esc(row.label)) + "</div>");
      if (!m) {
        parts.push('<rect class="bg" x="' + full0 + '" y="' + y + '" width="' + span + '" height="' + ROW + '"/>');
      }
      var bars = row.bars, bh = ROW - 2 * PAD, cls = m ? " m" : "";
      for (var b = 0; b < bars.length; b += 4) {
        parts.push('<rect class="b c' + bars[b + 2] + cls + '" x="' + bars[b] + '" y="' + (y + PAD) +
                   '" width="' + bars[b + 1] + '" height="' + bh + '" data-k="' + j + "," + b + '"/>');
      }
      var cp = row.critical;
      for (var c = 0; c < cp.length; c += 2) {
        parts.push('<rect class="cp" x="' + cp[c] + '" y="' + (y + 1) + '" width="' + cp[c + 1] +
                   '" height="' + (ROW - 2) + '"/>');
      }
    });
    entry.labels.innerHTML = labels.join("");
    var svg = entry.svg;
    svg.setAttribute("height", String(Math.max(h, 1)));
    svg.style.height = Math.max(h, 1) + "px";
    svg.innerHTML = parts.join("");
    setViewBox(entry);
  }

  function setViewBox(entry) {
    var h = Math.max(entry.rows.length * ROW, 1);
    entry.svg.setAttribute("viewBox", view[0] + " 0 " + (view[1] - view[0]) + " " + h);
  }

  function rankBlock(rank, k) {
    var det = document.createElement("details");
    det.className = "rank";
    var sum = document.createElement("summary");
    sum.innerHTML = "rank " + rank.rank + "<span></span>";
    sum.lastChild.textContent = rank.source + ", " + rank.rows.filter(function (r) { return !r.measured; }).length + " lanes";
    det.appendChild(sum);
    var body = document.createElement("div");
    body.className = "rankbody";
    var labels = document.createElement("div");
    labels.className = "labels";
    var svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("class", "lanes");
    svg.setAttribute("preserveAspectRatio", "none");
    body.appendChild(labels);
    body.appendChild(svg);
    det.appendChild(body);
    var entry = { svg: svg, labels: labels, rank: rank, rows: [], done: false };
    det.addEventListener("toggle", function () {
      if (det.open && !entry.done) { entry.done = true; drawRank(entry); drawn.push(entry); }
    });
    if (k < D.open_ranks) { det.open = true; entry.done = true; drawRank(entry); drawn.push(entry); }
    lanesEl.appendChild(det);
    bindLanes(entry);
  }

  function apply() {
    pending = false;
    drawn.forEach(setViewBox);
    drawAxis();
    rangeEl.textContent = fmt(view[0]) + " \u2013 " + fmt(view[1]) + " (" + fmt(view[1] - view[0]) + " shown)";
  }

  function schedule() {
    if (!pending) { pending = true; window.requestAnimationFrame(apply); }
  }

  function setView(a, b) {
    var span = full1 - full0, min = Math.max(span * MIN_ZOOM, 0.01);
    if (b - a < min) { var mid = (a + b) / 2; a = mid - min / 2; b = mid + min / 2; }
    if (b - a > span) { a = full0; b = full1; }
    if (a < full0) { b += full0 - a; a = full0; }
    if (b > full1) { a -= b - full1; b = full1; }
    view = [a, b];
    schedule();
  }

  function zoomAt(factor, frac) {
    var w = view[1] - view[0], t = view[0] + frac * w;
    setView(t - frac * w * factor, t + (1 - frac) * w * factor);
  }

  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return p * (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10);
  }

  function drawAxis() {
    var w = axis.clientWidth || 800, span = view[1] - view[0];
    var step = niceStep(span / Math.max(2, Math.floor(w / 110)));
    var parts = [];
    for (var t = Math.ceil(view[0] / step) * step; t <= view[1]; t += step) {
      var x = (t - view[0]) / span * w;
      parts.push('<line x1="' + x + '" x2="' + x + '" y1="18" y2="26"/><text x="' + (x + 3) + '" y="14">' + fmt(t) + "</text>");
    }
    axis.innerHTML = parts.join("") + '<rect class="brush" x="0" y="0" width="0" height="26"/>';
  }

  function fracOf(el, e) {
    var r = el.getBoundingClientRect();
    return Math.min(1, Math.max(0, (e.clientX - r.left) / Math.max(1, r.width)));
  }

  function showTip(entry, e) {
    var k = e.target.getAttribute && e.target.getAttribute("data-k");
    if (!k) { tip.hidden = true; return; }
    var jb = k.split(","), row = entry.rows[+jb[0]], b = +jb[1], bars = row.bars;
    var label = bars[b + 3];
    var name = label >= 0 ? D.names[label] : (-label) + " nodes merged (zoom limit of this page)";
    tip.textContent = "";
    var strong = document.createElement("b");
    strong.textContent = name;
    tip.appendChild(strong);
    tip.appendChild(document.createElement("br"));
    tip.appendChild(document.createTextNode(
      D.categories[bars[b + 2]] + " \u00b7 " + (row.measured ? "measured" : "simulated") + " \u00b7 " +
      row.label + " \u00b7 start " + fmt(bars[b]) + " \u00b7 " + fmt(bars[b + 1])));
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 540) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }

  function bindLanes(entry) {
    var svg = entry.svg, drag = null;
    svg.addEventListener("wheel", function (e) {
      if (!(e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      zoomAt(e.deltaY > 0 ? 1.25 : 0.8, fracOf(svg, e));
    }, { passive: false });
    svg.addEventListener("mousedown", function (e) {
      drag = { x: e.clientX, v: view.slice(), w: svg.getBoundingClientRect().width };
    });
    window.addEventListener("mouseup", function () { drag = null; });
    svg.addEventListener("mousemove", function (e) {
      if (drag) {
        var dt = (drag.x - e.clientX) / Math.max(1, drag.w) * (drag.v[1] - drag.v[0]);
        setView(drag.v[0] + dt, drag.v[1] + dt);
        tip.hidden = true;
      } else {
        showTip(entry, e);
      }
    });
    svg.addEventListener("mouseleave", function () { tip.hidden = true; });
    svg.addEventListener("dblclick", function () { setView(full0, full1); });
  }

  function bindAxis() {
    var brush = null;
    axis.addEventListener("mousedown", function (e) { brush = fracOf(axis, e); });
    axis.addEventListener("mousemove", function (e) {
      if (brush === null) return;
      var f = fracOf(axis, e), w = axis.clientWidth, r = axis.querySelector("rect.brush");
      r.setAttribute("x", String(Math.min(brush, f) * w));
      r.setAttribute("width", String(Math.abs(f - brush) * w));
    });
    axis.addEventListener("mouseup", function (e) {
      if (brush === null) return;
      var f = fracOf(axis, e), a = Math.min(brush, f), b = Math.max(brush, f), w = view[1] - view[0];
      brush = null;
      if ((b - a) * axis.clientWidth > 3) setView(view[0] + a * w, view[0] + b * w); else schedule();
    });
  }

  function bindControls() {
    document.querySelectorAll("button[data-zoom]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var z = btn.getAttribute("data-zoom");
        if (z === "in") zoomAt(0.5, 0.5); else if (z === "out") zoomAt(2, 0.5); else setView(full0, full1);
      });
    });
    document.getElementById("dim").addEventListener("change", function (e) {
      lanesEl.classList.toggle("dim", e.target.checked);
    });
    document.getElementById("hide-measured").addEventListener("change", function (e) {
      hideMeasured = e.target.checked;
      drawn.forEach(drawRank);
    });
    window.addEventListener("resize", schedule);
  }

  function sortTable(th) {
    var table = th.closest("table"), col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = !th.classList.contains("asc");
    th.parentNode.querySelectorAll("th").forEach(function (x) { x.classList.remove("asc", "desc"); });
    th.classList.add(asc ? "asc" : "desc");
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    function key(tr) {
      var td = tr.cells[col], v = td && td.getAttribute("data-v");
      return v !== null && v !== undefined ? parseFloat(v) : (td ? td.textContent : "");
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return asc ? c : -c;
    });
    rows.forEach(function (tr) { body.appendChild(tr); });
  }

  function bindTables() {
    document.querySelectorAll("table.sortable th").forEach(function (th) {
      th.addEventListener("click", function () { sortTable(th); });
    });
  }

  categoryStyles();
  D.ranks.forEach(rankBlock);
  bindAxis();
  bindControls();
  bindTables();
  apply();
  document.documentElement.setAttribute("data-drawn", "1");
})();
