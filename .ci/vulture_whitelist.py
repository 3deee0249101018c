"""Names the dead-code check (vulture, run by .ci/run) cannot see used, each group with who uses it.

Add to this file only what a framework, a library or a wire format uses by name; anything else it reports is
dead code to delete.
"""

# ruff: noqa: B018, F821 -- bare, undefined names are how vulture whitelists read
# mypy: ignore-errors
# msgspec Struct fields: serialised by name in API responses, never read in Python.
document_count, embedded_at, matches_database, vector_count, vector_providers, embedding_models
collections_checked, characters, block_count, truncated, parent_count, started_at, finished_at
already_queued, expires_in, client_id, scopes, sign_in, matched_groups, action, ok, agent_available, llm_ms, total_ms
collections_searched
document_hits
dropped_sentences
unsupported
# Source sync runs' report and progress (chonkit/source/models.py).
added, job_progress
# The LLM catalog's fields (GET /kappi/admin/llms), serialised by name.
default_model
# llama.cpp's server options set as attributes (ragu/local_llm.py, xllamacpp.CommonParams).
_.model_alias, _.hostnames, _.n_parallel, _.n_ctx, _.n_threads, _.cache_ram_mib, _.endpoint_slots, _.endpoint_metrics
_.ui, _.verbosity, _.api_keys
# Library options set as attributes: RE2 (line_filters), onnxruntime (SessionOptions), faiss (HNSW).
_.log_errors, _.never_capture, _.max_mem
_.graph_optimization_level, _.execution_mode, _.intra_op_num_threads, _.inter_op_num_threads
_.log_severity_level, _.efConstruction, _.efSearch
# Weaviate's collection config, passed by keyword.
vector_config, inverted_index_config
# Callback signatures: markdown-it block rules, context managers' __exit__.
silent, exc_type, traceback
# Litestar's plugin hooks (common/http/docs.py).
_.render, _.receive_router
# The status object tests read (common/vectors/resident.py), the migration heads tests check.
_.in_memory, current_heads
# The published contract's API for other applications.
parse_text_payload, parse_chunk
# ragu_client's public API for other applications: a method per route of both services, in the sync and async clients
# alike, that nothing in the packages calls. tests/ragu_client/test_openapi_models.py calls every one against the
# operation it sends (vulture reads packages only); the stream's Done.sources_used is read by callers.
_.activate_agent, _.add_documents, _.admin_agent, _.admin_agents, _.agent_versions, _.ask_streamed
_.assign_collections, _.cancel_job, _.change_embedding, _.collection_documents, _.create_agent, _.create_chat
_.create_source, _.deactivate_agent, _.delete_agent, _.delete_chat, _.delete_source, _.document_config, _.download
_.embedding_model, _.explain_access, _.follow_run, _.health, _.ready, _.remove_documents, _.rename_chat, _.retry_job
_.retry_run, _.set_document_config, _.sync_source, _.update_agent, _.update_source, _.wait_for_job, sources_used
# The OpenAI-compatible API's wire fields (kappi/openai_api/models.py), serialised by name for OpenAI clients.
owned_by, prompt_tokens, completion_tokens, total_tokens, ragu_citations, ragu_also_retrieved, finish_reason, logprobs
# The framework retrievers' hooks (ragu_client/langchain.py, llama_index.py): LangChain's BaseRetriever calls
# _aget_relevant_documents and reads pydantic's model_config and its validators, LlamaIndex's calls _aretrieve.
_.model_config, _._has_a_client, _._aget_relevant_documents, _._aretrieve
