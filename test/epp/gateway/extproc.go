package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// DestinationHeader is the header and the envoy.lb metadata key the picker names its endpoint
// with, and the header the gateway's response carries.
const DestinationHeader = "x-gateway-destination-endpoint"

// Picked is the picker's answer for one request.
type Picked struct {
	Endpoint   string            // IP:port
	SetHeaders map[string]string // the request header mutation (incl. DestinationHeader)
	Body       []byte            // the request body as the picker passes it on (it may rewrite the model)
}

// Pick runs the request phase of one ext_proc stream as Envoy does with the request body in
// FULL_DUPLEX_STREAMED mode: the request headers (not ending the stream), then the body in one
// message ending it. The picker answers the headers once it has the body, with the endpoint as
// dynamic metadata envoy.lb/x-gateway-destination-endpoint and as a header mutation, then
// streams the body back. The stream is closed afterwards: the response does not go through
// the picker (cancelling the stream ends its request there).
func Pick(ctx context.Context, client extprocv3.ExternalProcessorClient, r *http.Request, path string, body []byte) (Picked, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Process(ctx)
	if err != nil {
		return Picked{}, err
	}
	hv := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	headers := []*corev3.HeaderValue{
		hv(":method", r.Method), hv(":scheme", "http"), hv(":authority", r.Host), hv(":path", path),
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "content-length" || lk == "transfer-encoding" || lk == "connection" {
			continue
		}
		for _, v := range vs {
			headers = append(headers, hv(lk, v))
		}
	}
	headers = append(headers, hv("content-length", strconv.Itoa(len(body))))
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: headers}, EndOfStream: len(body) == 0},
	}}); err != nil {
		return Picked{}, fmt.Errorf("send headers: %w", err)
	}
	if len(body) > 0 {
		if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true},
		}}); err != nil {
			return Picked{}, fmt.Errorf("send body: %w", err)
		}
	}
	got := Picked{SetHeaders: map[string]string{}}
	bodyDone := len(body) == 0
	for range 1 << 12 { // bounded: one headers answer, then the body's chunks
		res, err := stream.Recv()
		if err != nil {
			return got, fmt.Errorf("ext_proc: %w", err)
		}
		if ir := res.GetImmediateResponse(); ir != nil {
			return got, fmt.Errorf("picker answered immediately: %d %s", ir.GetStatus().GetCode(), ir.GetBody())
		}
		var common *extprocv3.CommonResponse
		switch x := res.Response.(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			common = x.RequestHeaders.GetResponse()
			lb := res.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue()
			got.Endpoint = lb.GetFields()[DestinationHeader].GetStringValue()
		case *extprocv3.ProcessingResponse_RequestBody:
			common = x.RequestBody.GetResponse()
			if sr := common.GetBodyMutation().GetStreamedResponse(); sr != nil {
				got.Body = append(got.Body, sr.GetBody()...)
				bodyDone = sr.GetEndOfStream()
			} else if b := common.GetBodyMutation().GetBody(); b != nil {
				got.Body, bodyDone = b, true
			} else {
				got.Body, bodyDone = body, true
			}
		default:
			return got, fmt.Errorf("unexpected ext_proc answer %T", x)
		}
		for _, h := range common.GetHeaderMutation().GetSetHeaders() {
			v := string(h.GetHeader().GetRawValue())
			if v == "" {
				v = h.GetHeader().GetValue()
			}
			got.SetHeaders[strings.ToLower(h.GetHeader().GetKey())] = v
		}
		if got.Endpoint == "" {
			got.Endpoint = got.SetHeaders[DestinationHeader]
		}
		if got.Endpoint != "" && bodyDone {
			if len(body) == 0 {
				got.Body = nil
			}
			_ = stream.CloseSend()
			// The first of a comma-separated list (the picker may name fallbacks).
			got.Endpoint = strings.TrimSpace(strings.Split(got.Endpoint, ",")[0])
			return got, nil
		}
	}
	return got, errors.New("no endpoint and end of body in the picker's answers")
}
