/* pt2chakra report: draws the lane timelines (a canvas per rank) from the
   page's JSON, zooms and pans them, shows a tooltip per bar, and sorts the tables. No dependencies.
   A timeline's elements share an id prefix: "" for the page's, "base-" for the comparison
   with a baseline (its lanes tagged with their run). */
(function () {
  "use strict";
  var ROW = 14, CRIT_H = 3, MIN_ZOOM = 1e-6, MIN_PX = 0.8, CRIT = "#d62728";
  var tip = document.getElementById("tip");

  function timeline(prefix, root) {
    var D = JSON.parse(document.getElementById(prefix + "timeline-data").textContent);
    var lanesEl = document.getElementById(prefix + "lanes");
    var axis = document.getElementById(prefix + "axis");
    var rangeEl = document.getElementById(prefix + "range");
    var full0 = D.start_us, full1 = Math.max(D.end_us, D.start_us + 1);
    var view = [full0, full1];
    var drawn = [];  // {canvas, labels, rank, rows}: ranks drawn so far
    var hideMeasured = false;
    var pending = false;

    function lanesOf(rank) {
      return rank.rows.filter(function (r) { return !r.measured || r.run; }).length;
    }

    function rowName(row) {
      if (row.run) return row.run + " \u00b7 " + row.label;
      return row.measured ? "measured" : row.label;
    }

    function fmt(us) {
      var a = Math.abs(us);
      if (a >= 1e6) return (+(us / 1e6).toPrecision(4)) + " s";
      if (a >= 1e3) return (+(us / 1e3).toPrecision(4)) + " ms";
      return (+us.toPrecision(4)) + " us";
    }

    function esc(text) {
      return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
    }

    function visibleRows(rank) {
      return rank.rows.filter(function (r) { return !(hideMeasured && r.measured); });
    }

    function inPath(cp, s, e) {
      /* bars and critical outlines are sorted by start: a bar is on the path
         when an outline covers its middle */
      var lo = 0, hi = cp.length / 2, m = (s + e) / 2;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (cp[2 * mid] <= m) lo = mid + 1; else hi = mid; }
      for (var k = lo - 1; k >= 0 && k >= lo - 8; k--) { if (cp[2 * k] + cp[2 * k + 1] >= m) return true; }
      return false;
    }

    function drawRank(entry) {
      var rows = visibleRows(entry.rank);
      entry.rows = rows;
      entry.labels.innerHTML = rows.map(function (row) {
        var m = row.measured && !row.run;
        return '<div class="' + (m ? "m" : "") + '" title="' + esc(row.run ? rowName(row) : row.label) +
               (row.measured ? " (measured)" : " (simulated)") + '">' + esc(rowName(row)) + "</div>";
      }).join("");
      var cv = entry.canvas, dpr = window.devicePixelRatio || 1;
      var w = Math.max(cv.clientWidth, 1), h = Math.max(rows.length * ROW, 1);
      cv.style.height = h + "px";
      if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
        cv.width = Math.round(w * dpr);
        cv.height = Math.round(h * dpr);
      }
      var ctx = cv.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      var v0 = view[0], k = w / (view[1] - view[0]), dim = lanesEl.classList.contains("dim");
      rows.forEach(function (row, j) {
        var y = j * ROW, bars = row.bars, cp = row.critical, last = -1;
        if (!row.measured || row.run === "baseline") { ctx.globalAlpha = 1; ctx.fillStyle = "#f4f6f9"; ctx.fillRect(0, y, w, ROW); }
        var base = row.measured && !row.run ? 0.5 : 1;
        ctx.globalAlpha = base;
        for (var b = 0; b < bars.length; b += 4) {
          var x0 = (bars[b] - v0) * k;
          if (x0 > w) break;
          var x1 = (bars[b] + bars[b + 1] - v0) * k;
          if (x1 < 0) continue;
          if (bars[b + 2] !== last) { last = bars[b + 2]; ctx.fillStyle = D.colors[last]; }
          if (dim) ctx.globalAlpha = inPath(cp, bars[b], bars[b] + bars[b + 1]) ? base : base * 0.18;
          ctx.fillRect(x0, y + 1, Math.max(x1 - x0, MIN_PX), ROW - CRIT_H - 2);
        }
        ctx.globalAlpha = 1;
        ctx.fillStyle = CRIT;
        for (var c = 0; c < cp.length; c += 2) {
          var c0 = (cp[c] - v0) * k;
          if (c0 > w) break;
          var c1 = (cp[c] + cp[c + 1] - v0) * k;
          if (c1 < 0) continue;
          ctx.fillRect(c0, y + ROW - CRIT_H, Math.max(c1 - c0, MIN_PX), CRIT_H);
        }
      });
    }

    function rankBlock(rank, k) {
      var det = document.createElement("details");
      det.className = "rank";
      var sum = document.createElement("summary");
      sum.innerHTML = "rank " + esc(rank.rank) + "<span></span>";
      sum.lastChild.textContent = rank.source + ", " + lanesOf(rank) + " lanes";
      det.appendChild(sum);
      var body = document.createElement("div");
      body.className = "rankbody";
      var labels = document.createElement("div");
      labels.className = "labels";
      var canvas = document.createElement("canvas");
      canvas.className = "lanes";
      body.appendChild(labels);
      body.appendChild(canvas);
      det.appendChild(body);
      var entry = { canvas: canvas, labels: labels, rank: rank, rows: [], done: false };
      det.addEventListener("toggle", function () {
        if (det.open && !entry.done) { entry.done = true; drawn.push(entry); drawRank(entry); }
      });
      lanesEl.appendChild(det);
      if (k < D.open_ranks) { det.open = true; entry.done = true; drawn.push(entry); }
      bindLanes(entry);
    }

    function apply() {
      pending = false;
      drawn.forEach(drawRank);
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

    function barAt(entry, e) {
      /* the bar under the mouse: its row from y, then the last bar starting
         before the mouse (bars are sorted by start) and a few before it */
      var r = entry.canvas.getBoundingClientRect(), row = entry.rows[Math.floor((e.clientY - r.top) / ROW)];
      if (!row) return null;
      var k = r.width / (view[1] - view[0]), t = view[0] + (e.clientX - r.left) / k, tol = 2 / k;
      var bars = row.bars, lo = 0, hi = bars.length / 4;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (bars[4 * mid] <= t + tol) lo = mid + 1; else hi = mid; }
      for (var i = lo - 1; i >= 0 && i >= lo - 64; i--) {
        if (bars[4 * i] + bars[4 * i + 1] + tol >= t) return { row: row, b: 4 * i };
      }
      return null;
    }

    function showTip(entry, e) {
      var hit = barAt(entry, e);
      if (!hit) { tip.hidden = true; return; }
      var row = hit.row, b = hit.b, bars = row.bars, label = bars[b + 3];
      var name = label >= 0 ? D.names[label] : (-label) + " nodes merged (zoom limit of this page)";
      tip.textContent = "";
      var strong = document.createElement("b");
      strong.textContent = name;
      tip.appendChild(strong);
      tip.appendChild(document.createElement("br"));
      tip.appendChild(document.createTextNode(
        D.categories[bars[b + 2]] + " \u00b7 " + (row.run ? row.run + " (measured)" : row.measured ? "measured" : "simulated") + " \u00b7 " +
        row.label + " \u00b7 start " + fmt(bars[b]) + " \u00b7 " + fmt(bars[b + 1])));
      tip.hidden = false;
      tip.style.left = Math.max(0, Math.min(e.clientX + 12, window.innerWidth - 540)) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    }

    function bindLanes(entry) {
      var cv = entry.canvas, drag = null;
      cv.addEventListener("wheel", function (e) {
        if (!(e.ctrlKey || e.metaKey)) return;
        e.preventDefault();
        zoomAt(e.deltaY > 0 ? 1.25 : 0.8, fracOf(cv, e));
      }, { passive: false });
      cv.addEventListener("mousedown", function (e) {
        drag = { x: e.clientX, v: view.slice(), w: cv.getBoundingClientRect().width };
      });
      window.addEventListener("mouseup", function () { drag = null; });
      cv.addEventListener("mousemove", function (e) {
        if (drag) {
          var dt = (drag.x - e.clientX) / Math.max(1, drag.w) * (drag.v[1] - drag.v[0]);
          setView(drag.v[0] + dt, drag.v[1] + dt);
          tip.hidden = true;
        } else {
          showTip(entry, e);
        }
      });
      cv.addEventListener("mouseleave", function () { tip.hidden = true; });
      cv.addEventListener("dblclick", function () { setView(full0, full1); });
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
      root.querySelectorAll("button[data-zoom]").forEach(function (btn) {
        btn.addEventListener("click", function () {
          var z = btn.getAttribute("data-zoom");
          if (z === "in") zoomAt(0.5, 0.5); else if (z === "out") zoomAt(2, 0.5); else setView(full0, full1);
        });
      });
      var dimBox = document.getElementById(prefix + "dim");
      if (dimBox) dimBox.addEventListener("change", function (e) {
        lanesEl.classList.toggle("dim", e.target.checked);
        schedule();
      });
      var hideBox = document.getElementById(prefix + "hide-measured");
      if (hideBox) hideBox.addEventListener("change", function (e) {
        hideMeasured = e.target.checked;
        drawn.forEach(drawRank);
      });
      window.addEventListener("resize", schedule);
    }

    D.ranks.forEach(rankBlock);
    bindAxis();
    bindControls();
    apply();
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

  timeline("", document.getElementById("timeline"));
  if (document.getElementById("base-timeline-data")) timeline("base-", document.getElementById("baseline"));
  bindTables();
  document.documentElement.setAttribute("data-drawn", "1");
})();
