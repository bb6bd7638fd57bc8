/* The component packages load their code-split chunks (dcc's async-*.js, AG Grid's, plotly.min.js) by unversioned
   URLs, which a browser must ask the server about again on every visit. The server names each chunk's versioned URL
   (Dash's fingerprint of package version and file time, as on its script tags) in <meta name="helios-chunk-urls">,
   components/server/transfer.py; a script whose src is set to an unversioned chunk gets the versioned one instead,
   which the browser keeps for a year without asking again. Any other script is left alone. */
(function () {
  var meta = document.querySelector('meta[name="helios-chunk-urls"]');
  var versioned = meta ? JSON.parse(meta.getAttribute("content")) : {};
  var src = Object.getOwnPropertyDescriptor(HTMLScriptElement.prototype, "src");
  if (!src || !src.set) {
    return;
  }

  function withVersion(value) {
    var url = new URL(String(value), document.baseURI);
    if (url.origin !== window.location.origin || !versioned[url.pathname]) {
      return value;
    }
    return versioned[url.pathname] + url.search;
  }

  Object.defineProperty(HTMLScriptElement.prototype, "src", {
    configurable: true,
    enumerable: src.enumerable,
    get: src.get,
    set: function (value) {
      src.set.call(this, withVersion(value));
    },
  });
})();
