/* Cell renderers the AG Grids name (components/shell/tables.py). */
var dagcomponentfuncs = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});

/* A job id as a link to its job page: /jobs/<job_id>?dataset=<dataset>&cluster=<the row's cluster>. */
dagcomponentfuncs.HeliosJobLink = function (props) {
  if (props.value === undefined || props.value === null) {
    return "";
  }
  var row = props.data || {};
  var query = "?dataset=" + encodeURIComponent(props.dataset || "") + "&cluster=" + encodeURIComponent(row.cluster || "");
  return React.createElement("a", { href: "/jobs/" + encodeURIComponent(props.value) + query }, String(props.value));
};
