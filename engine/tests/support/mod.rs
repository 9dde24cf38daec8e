pub mod openai_server;
