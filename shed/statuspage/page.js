"use strict";
(function () {
  var url = location.pathname.replace(/\/+$/, "") + "/json";
  document.getElementById("json").setAttribute("href", url);
  url += "?history=0"; // the charts come drawn
  var rules = document.getElementById("rules");
  var live = document.getElementById("live");
  var polls = 0;
  function get(rep, path) {
    var v = rep;
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (v === null || v === undefined) return undefined;
      v = v[parts[i]];
    }
    return v;
  }
  function num(v, digits) {
    return v === null || v === undefined ? "\u2013" : v.toFixed(digits);
  }
  var formats = {
    int: function (v) { return v === undefined ? "\u2013" : String(v); },
    rate: function (v) { return num(v, 1); },
    ms: function (v) { return v === null || v === undefined ? "\u2013" : (v * 1000).toFixed(1) + " ms"; },
    pct: function (v) { return v === undefined ? "\u2013" : (v * 100).toFixed(0) + "%"; },
    mode: function (v) { return v ? "degraded" : "healthy"; },
    secs: function (v) { return v < 120 ? v.toFixed(0) + " s" : (v / 60).toFixed(1) + " min"; }
  };
  function update(rep) {
    // A reload or a store that starts reporting changes the page's shape.
    if (!rules || rep.rules.length !== Number(rules.getAttribute("data-rules")) ||
        (rep.store == null) !== (document.querySelector('[data-f^="store."]') == null) ||
        (rep.penalty == null) !== (document.querySelector('[data-f^="penalty."]') == null)) {
      location.reload();
      return;
    }
    var els = document.querySelectorAll("[data-f]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var v = get(rep, el.getAttribute("data-f"));
      var f = el.getAttribute("data-fmt");
      if (f === "points") {
        el.setAttribute("points", v || "");
      } else {
        el.textContent = formats[f](v);
      }
    }
  }
  function poll() {
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error(r.status);
        return r.json();
      })
      .then(function (rep) {
        update(rep);
        polls++;
        document.body.setAttribute("data-polls", String(polls));
        document.getElementById("polls").textContent = String(polls);
        live.textContent = "live";
        live.className = "live";
      })
      .catch(function () {
        live.textContent = "stale";
        live.className = "live stale";
      });
  }
  setInterval(poll, 1000);
})();
