// delaystream web view: asks before destructive posts and refreshes the
// chart from the server. No framework, no build step; the pages work
// without it (the chart then updates on reload).
"use strict";
document.addEventListener("submit", function (ev) {
  var f = ev.target;
  var q = f.getAttribute("data-confirm");
  if (q && !window.confirm(q)) {
    ev.preventDefault();
  }
});
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("chart-box");
  if (!box) {
    return;
  }
  var every = Math.max(1000, parseInt(box.getAttribute("data-interval"), 10) || 5000);
  var src = box.getAttribute("data-src");
  setInterval(function () {
    fetch(src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) { box.innerHTML = html; } })
      .catch(function () {});
  }, every);
});
