//! `kestrel convert`: a Hugging Face directory or a GGUF file to VQF.
