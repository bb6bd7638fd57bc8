"""The job explorer: AG Grid's infinite row model over every job, and the CSV download route."""
