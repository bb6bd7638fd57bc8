/* Figure cards and sections below the first screen ask for their content when they come into view (figure_card and
   lazy_section in components/shell/controls.py: the element carries its "shown" store's id and a token new with
   every layout). plotly.js starts loading as the browser has read the page, unless the server names the page among
   those that open without a chart (<meta name="helios-chart-free-paths">, components/server/transfer.py), so that it
   arrives and runs while Dash asks for the page's layout and figures; on a page without a chart it loads once a
   figure card appears, or while the browser is idle, so that the next chart page does not wait for it.
   window.HELIOS_DRAW_ALL = true (set before the app loads) asks for everything at once. */
(function () {
  var ATTR = "data-lazy-shown";
  var TOKEN = "data-lazy-token";
  var FIGURE = ".figure-slot"; // a figure card's slot (components/shell/controls.py, figure_card)
  var asked = new WeakMap(); // card element -> the layout token its figure was asked for
  var watched = new WeakMap(); // card element -> the layout token it is observed for

  function ask(el) {
    var token = el.getAttribute(TOKEN);
    var api = window.dash_clientside;
    if (asked.get(el) === token || !api || !api.set_props) {
      return;
    }
    asked.set(el, token);
    api.set_props(JSON.parse(el.getAttribute(ATTR)), { data: true });
  }

  var view = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) {
        view.unobserve(entry.target);
        ask(entry.target);
      }
    });
  });

  function scan() {
    if (document.querySelector(FIGURE)) {
      preloadPlotly();
    }
    document.querySelectorAll("[" + ATTR + "]").forEach(function (el) {
      var token = el.getAttribute(TOKEN);
      if (window.HELIOS_DRAW_ALL) {
        ask(el);
      } else if (watched.get(el) !== token) {
        watched.set(el, token);
        view.unobserve(el);
        view.observe(el); // observing delivers the card's visibility now, then on every scroll into view
      }
    });
  }

  function preloadPlotly() {
    var meta = document.querySelector('meta[name="helios-plotly-url"]');
    var url = window._dashPlotlyJSURL || (meta && meta.getAttribute("content"));
    if (window.Plotly || !url) {
      return;
    }
    var script = document.createElement("script");
    script.src = url;
    script.async = true;
    // dcc.Graph waits on window.Plotly when it is set (Promise.resolve of it), instead of loading plotly.js again;
    // plotly.js replaces it with itself when it has run.
    window.Plotly = new Promise(function (resolve, reject) {
      script.onload = resolve;
      script.onerror = function (err) {
        window.Plotly = undefined;
        reject(err);
      };
    });
    document.body.appendChild(script);
  }

  function chartFree() {
    var meta = document.querySelector('meta[name="helios-chart-free-paths"]');
    var paths = meta ? JSON.parse(meta.getAttribute("content")) : [];
    return paths.indexOf(window.location.pathname.replace(/\/+$/, "") || "/") >= 0;
  }

  function start() {
    if (!chartFree()) {
      preloadPlotly();
    }
    new MutationObserver(scan).observe(document.body, {
      childList: true,
      subtree: true,
      attributeFilter: [TOKEN],
    });
    scan();
    var idle = window.requestIdleCallback || function (fn) { return setTimeout(fn, 1000); };
    setTimeout(function () { idle(preloadPlotly, { timeout: 3000 }); }, 1000);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
