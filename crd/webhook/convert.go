// Package webhook serves the InferenceService conversion webhook: ConversionReviews at
// /convert over TLS, with a self-managed CA whose certificate the operator keeps in the CRD's
// caBundle. The conversion itself is crd.Convert, pure; this package is only the I/O around it.
package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/crd"
)

// maxReviewBytes bounds a request body; the API server sends at most a list page of objects.
const maxReviewBytes = 32 << 20

// ConvertHandler answers apiextensions.k8s.io/v1 ConversionReviews.
func ConvertHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
			return
		}
		review.Response = Review(review.Request)
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})
}

// Review converts every object of a request, or fails the whole request with the first error.
func Review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, obj := range req.Objects {
		out, err := crd.Convert(obj.Raw, req.DesiredAPIVersion)
		if err != nil {
			klog.ErrorS(err, "Conversion failed", "uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion, "object", i)
			return &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonBadRequest, Message: err.Error(),
			}}
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	return resp
}
