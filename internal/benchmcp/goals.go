package benchmcp

// Goal is one row of issue 18's table: what is measured, the goal as a
// ratio to its floor in the same run, and, while no benchmark measures it
// end to end, why.
type Goal struct {
	Key  string
	What string
	// Ratio is the largest median ratio to the floor that meets the goal;
	// 0 where the goal is not a ratio (Text says what it is).
	Ratio float64
	Text  string
	// Missing says why no end-to-end row measures this yet; empty when a
	// benchmark in this tree reports it.
	Missing string
}

// Goals lists every row of issue 18's table in its order. The summary
// table prints each, with the measured rows under it or "not measured"
// and the reason, so a reader sees every goal at once.
var Goals = []Goal{
	{Key: "blast", What: "blast radius on a warm catalog agent", Ratio: 1.5, Text: "≤ 1.5× a plain BFS, on 1M assets / 3M edges"},
	{Key: "diagnose", What: "diagnose, 100k changes stored (72 h and 720 h lookback)", Ratio: 1.5, Text: "< 200 ms and ≤ 1.5× reading its window"},
	{Key: "lag", What: "consumer lag, 200 groups / 10k partitions", Ratio: 2, Text: "≤ 2× one batched kadm round, flat over 100 calls"},
	{Key: "quality", What: "windowed quality checks, 10M rows × 12 columns", Ratio: 1.3, Text: "≤ 1.3× a hand-written scan, never slower than a query per check"},
	{Key: "warehouse-first", What: "first warehouse call after start", Text: "decide child vs in-process, numbers in README"},
	{Key: "import", What: "catalog import, 100k assets / 300k edges", Ratio: 2, Text: "≤ 2× a bulk insert, flat WAL"},
	{Key: "backfill", What: "28 days of hourly history on a 10M-row table", Text: "well inside the default timeout, with progress"},
	{Key: "coldstart", What: "cold start, spawn → tools/list, every agent", Ratio: 2, Text: "≤ 2× a bare go-sdk server (judged on CPU)"},
	{Key: "memory", What: "five agents after 100 calls each", Text: "< 150 MiB together, warehouse child released when idle"},
}
