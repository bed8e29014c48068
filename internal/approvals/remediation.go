package approvals

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// AppendReceiptTx appends a receipt entry inside the caller's
// transaction with this service's key, so another package can write its
// own rows and the receipt entry that records them atomically (remediate
// writes the incident's verification and its receipt entry together).
func (s *Service) AppendReceiptTx(ctx context.Context, tx *store.Tx, at time.Time, receiptID, kind, actor string, payload any) (Entry, error) {
	return s.appendEntry(ctx, tx, at, receiptID, kind, actor, payload)
}

// ProvenApproval returns nil when an approved proposal's approval can be
// proven: its seal holds and a sealed decision by a recorded approver
// approves it. A caller that acts on what a proposal says (a replacement
// verification reads) uses it, since the state column alone proves
// nothing.
func (s *Service) ProvenApproval(ctx context.Context, p *Proposal) error {
	return s.verifyApproval(ctx, p)
}
