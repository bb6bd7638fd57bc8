/* The viewport's width in a cookie, read by the server when it lays out a page: the time charts are thinned to about
   two points per pixel of their width (components/charts/decimate.py). Set as the page loads, and again after a
   resize (a first visit's page is laid out before it exists: its cards ask for their figures at the viewport's width,
   WANT_JS in components/shell/callbacks.py); it names no one and is sent to this site only. */
(function () {
  function remember() {
    document.cookie = "helios-viewport=" + Math.round(window.innerWidth) + "; path=/; max-age=31536000; SameSite=Lax";
  }
  remember();
  var pending;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(remember, 250);
  });
})();
