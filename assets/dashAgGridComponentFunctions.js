// Cell renderers of the dashboard's AG Grids (dash-ag-grid reads them from this global).
var dagcomponentfuncs = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});

// A job id as a link to its job page: the grid's context gives the dataset and the page's path, the row its cluster.
dagcomponentfuncs.JobLink = function (props) {
    if (props.value === null || props.value === undefined || !props.data) {
        return props.value === null || props.value === undefined ? null : String(props.value);
    }
    var context = props.context || {};
    var query = new URLSearchParams({ds: context.dataset || "", cluster: props.data.cluster || ""});
    var href = (context.jobPath || "/jobs/") + encodeURIComponent(props.value) + "?" + query.toString();
    return React.createElement("a", {href: href, className: "job-link"}, String(props.value));
};
