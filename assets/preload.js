/* Dash's renderer fetches the shell's layout and the callback list before it draws anything; the page's HTML already
   carries both answers (components/server/preload.py: <script type="application/json" data-helios-preload="URL path">),
   so each of those two fetches is answered once from there instead of the network — a round trip saved per page
   load. Any later fetch of the same URL goes to the server, as does the layout's when it was laid out for another
   URL than the one the browser shows (a proxy that rewrote the path): the bare shell then reads the browser's. */
(function () {
  var ATTR = "data-helios-preload";
  var LAID_FOR = "data-helios-url"; // a layout laid out for its page's URL names it: used only at that URL
  var here = window.location.pathname + window.location.search;
  var kept = {}; // URL path -> the answer's JSON text, until Dash asks for it
  document.querySelectorAll("script[" + ATTR + "]").forEach(function (block) {
    var laidFor = block.getAttribute(LAID_FOR);
    if (laidFor === null || laidFor === here) {
      kept[block.getAttribute(ATTR)] = block.textContent;
    }
  });
  var send = window.fetch.bind(window);

  function keptPath(resource, init) {
    var url = typeof resource === "string" ? resource : resource && resource.url;
    var method = ((init && init.method) || (resource && resource.method) || "GET").toUpperCase();
    if (typeof url !== "string" || method !== "GET") {
      return null;
    }
    var target = new URL(url, window.location.href);
    var path = target.pathname;
    var same = target.origin === window.location.origin && !target.search;
    return same && Object.prototype.hasOwnProperty.call(kept, path) ? path : null;
  }

  window.fetch = function (resource, init) {
    var path = keptPath(resource, init);
    if (path === null) {
      return send(resource, init);
    }
    var body = kept[path];
    delete kept[path];
    var headers = { "Content-Type": "application/json" };
    return Promise.resolve(new Response(body, { status: 200, headers: headers }));
  };
})();
