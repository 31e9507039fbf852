"""The console's only stylesheet and script (served from /static: the CSP allows no inline ones)."""

CSS = """
body { font: 14px system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #243447; color: #fff; padding: 8px 16px; }
header a { color: #fff; font-weight: bold; text-decoration: none; }
header .ro { opacity: .7; margin-left: 8px; }
main { padding: 8px 16px; }
table { border-collapse: collapse; background: #fff; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; white-space: nowrap; }
td.path, .path { font-family: ui-monospace, monospace; font-size: 12px; }
td.path { max-width: 28em; overflow: hidden; text-overflow: ellipsis; }
.clip { display: inline-block; max-width: 14em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  vertical-align: bottom; }
td.run .clip { max-width: 18em; }
td.trend { padding: 1px 8px; }
.note { color: #555; }
.plot { position: relative; max-width: 900px; }
.chart { display: block; width: 100%; background: #fff; border: 1px solid #ddd; }
.chart .grid { stroke: #eee; }
.chart .axis { stroke: #888; }
.chart .tick { font-size: 11px; fill: #555; }
.chart .title { font-size: 12px; fill: #333; }
.chart .line { fill: none; stroke: #8aa4bd; stroke-width: 1.5; }
.mark { fill: #bbb; stroke: #fff; stroke-width: 1; }
.mark.evicted, .key.evicted { fill: #e07b39; background: #e07b39; }
.mark.deleted, .key.deleted { fill: #b03030; background: #b03030; }
.mark.kept, .key.kept { fill: #2a7ab8; background: #2a7ab8; }
.mark.preserved, .key.preserved { fill: #7b52ab; background: #7b52ab; }
.mark.pending, .key.pending { fill: #e0c030; background: #e0c030; }
.mark.latest { stroke: #111; stroke-width: 2; }
.mark.best, .key.best { fill: #1f9d55; background: #1f9d55; }
.mark.hover { stroke: #000; stroke-width: 3; }
.key { display: inline-block; padding: 1px 6px; margin-right: 4px; color: #fff; background: #bbb; border-radius: 3px; }
.key.latest { color: #111; background: #fff; border: 2px solid #111; }
.key.no-value { color: #333; background: #ddd; }
.tip { position: absolute; pointer-events: none; background: #fff; border: 1px solid #888; border-radius: 3px;
  padding: 4px 8px; font-size: 12px; box-shadow: 0 2px 6px rgba(0, 0, 0, .2); max-width: 440px;
  overflow-wrap: anywhere; }
.tip .value { font-weight: bold; }
.tip .path { color: #555; }
.spark { display: block; }
.spark .line { fill: none; stroke: #2a7ab8; stroke-width: 1.2; }
.spark .best { fill: #1f9d55; }
.spark .latest { fill: #fff; stroke: #111; stroke-width: 1; }
.timeline .kind { font-weight: bold; }
.timeline .kind.evicted { color: #e07b39; }
.pager a { margin-left: 8px; }
pre { background: #fff; border: 1px solid #ddd; padding: 8px; overflow: auto; }
"""

JS = """
(function () {
  if (!window.EventSource) return;
  var pending = false;
  function refresh() {
    if (pending) return;
    pending = true;
    fetch(location.href, {credentials: "same-origin"}).then(function (r) { return r.text(); }).then(function (t) {
      var doc = new DOMParser().parseFromString(t, "text/html");
      var fresh = doc.getElementById("main"), old = document.getElementById("main");
      if (fresh && old) { old.innerHTML = fresh.innerHTML; }
      document.body.setAttribute("data-refreshed", String(Date.now()));
    }).finally(function () { pending = false; });
  }
  var source = new EventSource("/events");
  source.onmessage = function (event) {
    var m = location.pathname.match(/^\\/runs\\/([^\\/]+)/);
    if (m) {
      var changed = JSON.parse(event.data).runs || [];
      if (changed.indexOf(decodeURIComponent(m[1])) < 0) return;
    }
    refresh();
  };
  source.onopen = function () { document.body.setAttribute("data-live", "1"); };
})();

(function () {  // the chart's tooltip: the mark nearest the pointer (delegated: the page's <main> is replaced)
  var hovered = null;
  function hide() {
    if (!hovered) return;
    hovered.classList.remove("hover"); hovered = null;
    var tips = document.querySelectorAll(".plot .tip");
    for (var i = 0; i < tips.length; i++) tips[i].hidden = true;
  }
  function nearest(svg, event) {
    var ctm = svg.getScreenCTM();
    if (!ctm) return null;
    var pt = svg.createSVGPoint();
    pt.x = event.clientX; pt.y = event.clientY;
    var at = pt.matrixTransform(ctm.inverse()), found = null, best = 40 * 40;
    var marks = svg.querySelectorAll(".mark");
    for (var i = 0; i < marks.length; i++) {
      var m = marks[i], circle = m.hasAttribute("cx");  // a <rect> (no value) is 6 wide, on the x axis
      var dx = (circle ? +m.getAttribute("cx") : +m.getAttribute("x") + 3) - at.x;
      var dy = (circle ? +m.getAttribute("cy") : +m.getAttribute("y") + 3) - at.y;
      if (dx * dx + dy * dy < best) { best = dx * dx + dy * dy; found = marks[i]; }
    }
    return found;
  }
  function line(tip, cls, text) {
    var div = document.createElement("div");
    div.className = cls; div.textContent = text; tip.appendChild(div);
  }
  function show(svg, mark) {
    var plot = svg.parentNode, tip = plot.querySelector(".tip");
    if (!tip) return;
    if (hovered !== mark) { hide(); hovered = mark; mark.classList.add("hover"); }
    tip.textContent = "";
    line(tip, "index", "report " + mark.getAttribute("data-index"));
    line(tip, "value", svg.getAttribute("data-metric") + ": " + mark.getAttribute("data-value"));
    line(tip, "marks", mark.getAttribute("data-marks"));
    line(tip, "path", mark.getAttribute("data-path"));
    tip.hidden = false;
    var box = plot.getBoundingClientRect(), dot = mark.getBoundingClientRect();
    var left = dot.right - box.left + 8, top = dot.top - box.top - tip.offsetHeight - 4;
    if (left + tip.offsetWidth > box.width) left = dot.left - box.left - tip.offsetWidth - 8;
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = Math.max(0, top) + "px";
  }
  document.addEventListener("mousemove", function (event) {
    var svg = event.target.closest ? event.target.closest("svg.chart") : null;
    var mark = svg ? nearest(svg, event) : null;
    if (mark) show(svg, mark); else hide();
  });
})();
"""
