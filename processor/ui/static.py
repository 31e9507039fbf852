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
.chart { width: 100%; max-width: 900px; background: #fff; border: 1px solid #ddd; }
.chart .axis { stroke: #888; }
.chart .label { font-size: 11px; fill: #555; }
.mark { fill: #bbb; stroke: none; }
.mark.evicted, .key.evicted { fill: #e07b39; background: #e07b39; }
.mark.deleted, .key.deleted { fill: #b03030; background: #b03030; }
.mark.kept, .key.kept { fill: #2a7ab8; background: #2a7ab8; }
.mark.preserved, .key.preserved { fill: #7b52ab; background: #7b52ab; }
.mark.pending, .key.pending { fill: #e0c030; background: #e0c030; }
.mark.latest, .key.latest { stroke: #111; stroke-width: 2; }
.mark.best, .key.best { fill: #1f9d55; background: #1f9d55; }
.key { display: inline-block; padding: 1px 6px; margin-right: 4px; color: #fff; background: #bbb; border-radius: 3px; }
.key.latest { color: #111; background: #fff; border: 2px solid #111; }
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
"""
