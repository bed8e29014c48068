package warehouse

import "fmt"

// BudgetError is a statement refused before it ran because its dry-run
// estimate would pass a scan budget (BigQuery's per-query and per-session
// budgets). It lives here, not in the driver, so an agent that reaches its
// warehouse through its child process gets the same type back
// (errors.As) without linking the driver.
type BudgetError struct {
	Warehouse string `json:"warehouse"`
	Estimate  int64  `json:"estimate"`
	Budget    int64  `json:"budget"`
	Used      int64  `json:"used,omitempty"`
	Session   bool   `json:"session,omitempty"`
}

func (e *BudgetError) Error() string {
	if e.Session {
		return fmt.Sprintf("refused: the query would scan %s (dry-run estimate) but warehouse %s has %s left of its %s per-session scan budget (%s used); nothing was run. Narrow the window or the checks, or raise the session budget",
			bytesText(e.Estimate), e.Warehouse, bytesText(max(e.Budget-e.Used, 0)), bytesText(e.Budget), bytesText(e.Used))
	}
	return fmt.Sprintf("refused: the query would scan %s (dry-run estimate), over warehouse %s's per-query scan budget of %s; nothing was run. Narrow the window or the checks, or raise the per-query budget",
		bytesText(e.Estimate), e.Warehouse, bytesText(e.Budget))
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
