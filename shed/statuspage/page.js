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
    count: function (v) { return v === undefined ? "0" : String(v); }, // a count left out of the report at zero
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
  // The hot keys and penalized clients come as rows, rebuilt from each
  // report (text only: a key is data, never markup).
  function cell(tr, text, code) {
    var td = document.createElement("td");
    var el = td;
    if (code) {
      el = document.createElement("code");
      td.appendChild(el);
    }
    el.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function button(tr, action, rule, hash) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "act";
    b.textContent = action;
    b.setAttribute("data-action", action);
    b.setAttribute("data-hash", hash);
    if (rule) b.setAttribute("data-rule", rule);
    cell(tr, "").appendChild(b);
  }
  function rows(id, list, empty, fill) {
    var table = document.getElementById(id);
    if (!table) return;
    var body = table.tBodies[0];
    while (body.firstChild) body.removeChild(body.firstChild);
    if (!list || list.length === 0) {
      var tr = document.createElement("tr");
      tr.className = "empty";
      cell(tr, empty).colSpan = 6;
      body.appendChild(tr);
      return;
    }
    for (var i = 0; i < list.length; i++) {
      var row = document.createElement("tr");
      fill(row, list[i]);
      body.appendChild(row);
    }
  }
  function lists(rep) {
    rows("hot-keys", rep.hot_keys, rep.hot_keys_note || "No key in use.", function (tr, k) {
      tr.className = "hot-key";
      tr.setAttribute("data-rule", k.rule);
      tr.setAttribute("data-key", k.key);
      var td = cell(tr, k.rule);
      if (k.scope) {
        var s = document.createElement("small");
        s.textContent = " " + k.scope;
        td.appendChild(s);
      }
      cell(tr, k.key, true);
      cell(tr, k.used + " / " + k.limit);
      cell(tr, String(k.remaining));
      cell(tr, formats.secs(k.reset_after_seconds));
      if (rep.actions) button(tr, "reset", k.rule, k.key);
    });
    rows("penalized", rep.penalized, rep.penalty ? "No client in a timeout." : "No penalty box that lists its clients.", function (tr, p) {
      tr.className = "penalized";
      tr.setAttribute("data-key", p.key);
      cell(tr, p.key, true);
      cell(tr, formats.secs(p.left_seconds));
      cell(tr, String(p.level));
      cell(tr, String(p.strikes));
      if (rep.actions) button(tr, "pardon", "", p.key);
    });
  }
  var base = location.pathname.replace(/\/+$/, "") + "/";
  document.addEventListener("click", function (ev) {
    var b = ev.target;
    if (!b || b.className !== "act") return;
    var body = { hash: b.getAttribute("data-hash") };
    if (b.getAttribute("data-rule")) body.rule = b.getAttribute("data-rule");
    b.disabled = true;
    fetch(base + b.getAttribute("data-action"), {
      method: "POST", cache: "no-store", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body)
    }).then(function (r) {
      b.textContent = r.ok ? "done" : "refused (" + r.status + ")";
    }).catch(function () {
      b.textContent = "failed";
    });
  });
  function poll() {
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error(r.status);
        return r.json();
      })
      .then(function (rep) {
        update(rep);
        lists(rep);
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
