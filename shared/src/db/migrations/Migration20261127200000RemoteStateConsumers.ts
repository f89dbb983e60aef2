import { Migration } from '@mikro-orm/migrations';

/**
 * Remote state consumers, as HCP Terraform keeps them: the workspaces allowed to read a workspace's
 * state. A link goes with either of its workspaces; the second index serves that deletion.
 */
export class Migration20261127200000RemoteStateConsumers extends Migration {
  override up(): void {
    this.addSql(
      `create table "workspace_remote_state_consumers" ("workspace_id" varchar(32) not null, "consumer_id" varchar(32) not null, primary key ("workspace_id", "consumer_id"));`,
    );
    this.addSql(`create index "workspace_remote_state_consumers_consumer_idx" on "workspace_remote_state_consumers" ("consumer_id");`);
    this.addSql(
      `alter table "workspace_remote_state_consumers" add constraint "workspace_remote_state_consumers_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "workspace_remote_state_consumers" add constraint "workspace_remote_state_consumers_consumer_id_foreign" foreign key ("consumer_id") references "workspaces" ("id") on update cascade on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "workspace_remote_state_consumers" cascade;`);
  }
}
