/* Functions the AG Grids name in their column definitions (components/shell/tables.py). */
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});

/* The row's pre-formatted text in field key (human units or the exact value), else the raw value. */
dagfuncs.heliosText = function (params, key) {
  if (params.data && params.data[key] !== undefined && params.data[key] !== null) {
    return params.data[key];
  }
  return params.value === undefined || params.value === null ? "" : String(params.value);
};

/* A CSV cell a spreadsheet would run as a formula (text matching pattern) quoted, as analytics.csv_safety does. */
dagfuncs.heliosCsvCell = function (params, pattern) {
  var value = params.value;
  if (typeof value === "string" && new RegExp(pattern).test(value)) {
    return "'" + value;
  }
  return value;
};
