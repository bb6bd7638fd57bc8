/* The viewport's width in a cookie, read by the server when it lays out a page: the time charts are thinned to about
   two points per pixel of their width (components/charts/decimate.py), and a figure's margin leaves its legend the
   rows it takes at the card's width (components/charts/margins.py). Beside it, the width the charts' font sets a
   sample text in (<meta name="helios-text-sample">: canvas measureText, no layout), against which the server scales
   its estimate of the legend's text. Set as the page loads, the width again after a resize (a first visit's page is
   laid out before they exist: its cards ask for their figures with both, WANT_JS in components/shell/callbacks.py);
   they name no one and are sent to this site only. */
(function () {
  function cookie(name, value) {
    document.cookie = name + "=" + value + "; path=/; max-age=31536000; SameSite=Lax";
  }

  function remember() {
    cookie("helios-viewport", Math.round(window.innerWidth));
  }

  function measureText() {
    var meta = document.querySelector('meta[name="helios-text-sample"]');
    var canvas = document.createElement("canvas");
    var context = canvas.getContext ? canvas.getContext("2d") : null;
    if (!meta || !context) {
      return;
    }
    var sample = JSON.parse(meta.getAttribute("content"));
    context.font = "100px " + sample.font;
    window.HELIOS_TEXT_SAMPLE_PX = Math.round(context.measureText(sample.text).width);
    cookie("helios-text-sample", window.HELIOS_TEXT_SAMPLE_PX);
  }

  remember();
  measureText();
  var pending;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(remember, 250);
  });
  // the cookie is the site's, not the window's: a window the reader comes back to writes its own width again
  window.addEventListener("focus", remember);
  window.addEventListener("pageshow", remember);
})();
