/* A background run's progress poll (a POST to _dash-update-component carrying job=) that meets a network error is
   tried again, a few times a second apart. Dash ends its poll chain on a network error without switching the
   "running" state off, so a poll cut by a restarting server worker would leave the page saying "running…" for ever;
   the retry reaches the new worker, which answers as for any vanished job (the what-if page then shows LOST_RUN).
   Only polls are retried: a request that starts a job is never sent twice. */
(function () {
  var RETRIES = 5;
  var DELAY_MS = 1000;
  var send = window.fetch.bind(window);

  function isPoll(resource) {
    var url = typeof resource === "string" ? resource : resource && resource.url;
    return typeof url === "string" && url.indexOf("_dash-update-component") !== -1 && /[?&]job=/.test(url);
  }

  function later(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  function attempt(resource, init, left) {
    return send(resource, init).catch(function (error) {
      if (left <= 0) {
        throw error;
      }
      return later(DELAY_MS).then(function () {
        return attempt(resource, init, left - 1);
      });
    });
  }

  window.fetch = function (resource, init) {
    return isPoll(resource) ? attempt(resource, init, RETRIES) : send(resource, init);
  };
})();
