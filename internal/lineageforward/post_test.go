package lineageforward

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/rest/resttest"
)

// An OpenLineage endpoint answering 1 GiB costs at most the cap: the post
// is reported as failed with the reason, and memory stays bounded.
func TestPostHugeAnswerIsBounded(t *testing.T) {
	for _, status := range []int{http.StatusCreated, http.StatusInternalServerError} {
		srv := resttest.HugeServer(t, status)
		var f *Forwarding
		resttest.RequireBoundedError(t, 4*maxForwardAnswer+(16<<20), func() error {
			f = post(context.Background(), &config.Service{URL: srv.URL, Timeout: 20 * time.Second}, "tok", []byte(`{}`))
			if f.OK {
				return nil
			}
			return errString(f.Error)
		})
		if f.OK || f.URL != srv.URL+"/api/v1/lineage" || !strings.Contains(f.Error, "more than 1048576 bytes") {
			t.Errorf("status %d: %+v", status, f)
		}
	}
}

// An openlineage.url that is not http(s) is refused before any request.
func TestPostBadURL(t *testing.T) {
	for _, bad := range []string{"marquez:5000", "file:///etc/passwd", "http://"} {
		f := post(context.Background(), &config.Service{URL: bad}, "", []byte(`{}`))
		if f.OK || !strings.Contains(f.Error, "is not an http(s) URL") {
			t.Errorf("%q: %+v", bad, f)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
