from ckptlog.cli.main import main

main()
