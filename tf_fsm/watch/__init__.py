"""`tf-fsm watch`: resumes tickets when their files arrive."""
