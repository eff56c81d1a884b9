// Command convert turns the TensorFlow.js weights of Universal Sentence
// Encoder lite (dist/model.json and its shards, fetched by ../fetch.sh)
// into pkg/toolcatalog/builtin/use/weights.bin: the tensors the Go forward pass
// uses, renamed, as float16.
//
//	go run ./hack/use-model/convert "$(bash hack/use-model/fetch.sh)" pkg/toolcatalog/builtin/use/weights.bin
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// tensors maps the Go names to the graph's weight names.
var tensors = []struct{ name, source string }{
	{"embeddings", "module/Embeddings_en"},
	{"timing", "module_apply_default/Encoder_en/KonaTransformer/Encode/TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1"},
}

func layerTensors(l string) []struct{ name, source string } {
	p := "module_apply_default/Encoder_en/KonaTransformer/Encode/Layer_" + l + "/TransformerLayer/"
	k := "module/Encoder_en/KonaTransformer/Encode/Layer_" + l + "/TransformerLayer/"
	s := "module_apply_default/Encoder_en/KonaTransformer/Encode/TransformerStack/Layer_" + l + "/TransformerLayer/"
	out := []struct{ name, source string }{
		{"l" + l + ".attn_norm.scale", p + "layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat"},
		{"l" + l + ".attn_norm.bias", p + "layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat"},
		{"l" + l + ".qkv.kernel", k + "MultiheadAttention/qkv_transform_single/kernel/part_0"},
		{"l" + l + ".qkv.bias", p + "MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat"},
		{"l" + l + ".out.kernel", k + "MultiheadAttention/output_transform_single/kernel/part_0"},
		{"l" + l + ".out.bias", p + "MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat"},
		{"l" + l + ".ffn_norm.scale", p + "FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat"},
		{"l" + l + ".ffn_norm.bias", p + "FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat"},
		{"l" + l + ".ffn1.kernel", s + "FFN/conv1/Tensordot/Reshape_1"},
		{"l" + l + ".ffn1.bias", p + "FFN/conv1/bias/ConcatPartitions/concat"},
		{"l" + l + ".ffn2.kernel", s + "FFN/conv2/Tensordot/Reshape_1"},
		{"l" + l + ".ffn2.bias", p + "FFN/conv2/bias/ConcatPartitions/concat"},
	}
	if l == "0" {
		out = append(out,
			struct{ name, source string }{"l0.residual.kernel", p + "dense/kernel/ConcatPartitions/concat"},
			struct{ name, source string }{"l0.residual.bias", p + "dense/bias/ConcatPartitions/concat"})
	}
	return out
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: convert PACKAGE_DIR OUTPUT")
		os.Exit(2)
	}
	if err := convert(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "convert:", err)
		os.Exit(1)
	}
}

type manifest struct {
	WeightsManifest []struct {
		Paths   []string `json:"paths"`
		Weights []struct {
			Name  string `json:"name"`
			Shape []int  `json:"shape"`
			Dtype string `json:"dtype"`
		} `json:"weights"`
	} `json:"weightsManifest"`
}

func convert(pkg, out string) error {
	dist := filepath.Join(pkg, "dist")
	raw, err := os.ReadFile(filepath.Join(dist, "model.json"))
	if err != nil {
		return err
	}
	var m manifest
	if unmarshalErr := json.Unmarshal(raw, &m); unmarshalErr != nil {
		return unmarshalErr
	}
	type tensor struct {
		shape []int
		data  []float32
	}
	all := map[string]tensor{}
	for _, group := range m.WeightsManifest {
		var buf []byte
		for _, p := range group.Paths {
			b, readFileErr := os.ReadFile(filepath.Join(dist, p))
			if readFileErr != nil {
				return readFileErr
			}
			buf = append(buf, b...)
		}
		off := 0
		for _, w := range group.Weights {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			if w.Dtype == "float32" {
				data := make([]float32, n)
				for i := range data {
					data[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[off+4*i:]))
				}
				all[w.Name] = tensor{shape: w.Shape, data: data}
			}
			off += 4 * n
		}
	}
	list := append(append(tensors, layerTensors("0")...), layerTensors("1")...)
	list = append(list,
		struct{ name, source string }{"head.kernel", "module/Encoder_en/hidden_layers/tanh_layer_0/weights"},
		struct{ name, source string }{"head.bias", "module/Encoder_en/hidden_layers/tanh_layer_0/bias"})

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// Format: "USEL" version(u32) count(u32), then per tensor: name length
	// (u16), name, rank (u8), dims (u32 each), float16 data. The buffered
	// writer keeps the first write error, which Flush returns.
	bw := bufio.NewWriter(f)
	w := func(v any) { _ = binary.Write(bw, binary.LittleEndian, v) }
	_, _ = bw.WriteString("USEL")
	w(uint32(1))
	w(uint32(len(list)))
	for _, t := range list {
		src, ok := all[t.source]
		if !ok {
			return fmt.Errorf("weight %s (%s) not found", t.name, t.source)
		}
		shape := src.shape
		// 1x1 convolution kernels are plain matrices.
		if len(shape) == 4 && shape[0] == 1 && shape[1] == 1 {
			shape = shape[2:]
		}
		if strings.HasSuffix(t.name, "timing") {
			shape = shape[1:]
		}
		w(uint16(len(t.name)))
		_, _ = bw.WriteString(t.name)
		w(uint8(len(shape)))
		for _, d := range shape {
			w(uint32(d))
		}
		half := make([]uint16, len(src.data))
		for i, x := range src.data {
			half[i] = toHalf(x)
		}
		w(half)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// toHalf converts to IEEE 754 binary16, rounding to nearest even.
func toHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case (b>>23)&0xff == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint16(mant >> shift)
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | half
	}
	half := sign | uint16(exp)<<10 | uint16(mant>>13)
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++
	}
	return half
}
